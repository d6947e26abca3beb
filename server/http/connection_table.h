// The HTTP transport's connection table: the connection cap
// (HttpTransportOptions::max_connections) and the idle list it makes room
// from, and the door's connection metrics.
//
// Thread-safety: every method is safe from any loop's thread (one mutex).
#ifndef TENSOROPS_SERVER_HTTP_CONNECTION_TABLE_H_
#define TENSOROPS_SERVER_HTTP_CONNECTION_TABLE_H_

#include <cstdint>
#include <memory>
#include <mutex>

#include "boost/intrusive/list.hpp"
#include "server/http/connection_metrics.h"

namespace tensorops {

// A connection as the connection cap sees it (connection.cc's Connection is
// one): in the table's idle list while it waits for a request with no byte
// of it read yet, so that a new connection at the cap can close the one idle
// longest instead of being refused. The hook and `evicted` are guarded by
// the table's mutex.
class ConnectionBase : public boost::intrusive::list_base_hook<
                           boost::intrusive::link_mode<boost::intrusive::safe_link>>,
                       public std::enable_shared_from_this<ConnectionBase> {
 public:
  virtual ~ConnectionBase() = default;
  // Closes the connection soon, on its loop's thread; from any thread.
  virtual void Evict() = 0;

  bool evicted = false;  // taken off the idle list to be closed
};

class ConnectionTable {
 public:
  // `metrics` (RegisterHttpConnections') must outlive the table;
  // `max_connections` 0: no cap.
  ConnectionTable(const ConnectionMetrics* metrics, int64_t max_connections)
      : metrics_(metrics), max_connections_(max_connections) {}

  // What becomes of a connection just accepted: kOpen, counted (and
  // `*evict`, when set, is an idle connection to close to make room); kRefuse,
  // not counted: answer 503 and close; kDrop: close at once.
  enum class Admission { kOpen, kRefuse, kDrop };
  Admission Admit(std::shared_ptr<ConnectionBase>* evict);
  // A connection Admit let in (`counted`: kOpen, else kRefuse) has ended.
  void Closed(ConnectionBase* c, bool counted);
  // A counted connection waits for a request with no byte of it read: the
  // cap may close it to make room. LeaveIdle is false when it already chose
  // to (the connection then does nothing more: Evict closes it).
  void EnterIdle(ConnectionBase* c);
  bool LeaveIdle(ConnectionBase* c);
  // Why the door closed a connection (tensorops_http_connections_closed_total).
  void Record(HttpClose reason) { metrics_->RecordClosed(static_cast<int>(reason)); }

 private:
  using IdleList = boost::intrusive::list<ConnectionBase>;

  const ConnectionMetrics* const metrics_;
  const int64_t max_connections_;
  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  std::mutex mu_;
  int64_t open_ = 0;      // guarded by mu_: counted connections
  int64_t refusing_ = 0;  // guarded by mu_: answering their 503
  IdleList idle_;         // guarded by mu_: idle longest first
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_CONNECTION_TABLE_H_
