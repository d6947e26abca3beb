// The gRPC door's plaintext listening sockets, accepted on a thread of our
// own and handed to gRPC one connection at a time
// (grpc::AddInsecureChannelFromFd), with a cap on live connections.
//
// Why not gRPC's own listener: gRPC 1.51's accept loop (tcp_server_posix)
// stops for good after one accept4 failure with EMFILE (grpc/grpc issues
// 16058 and 20418), so one flood at the descriptor limit leaves the port
// refusing nothing and accepting nothing until a restart, and gRPC 1.51 has
// no connection cap of its own. This loop
//   - caps live connections at Options::max_connections: one over the cap is
//     closed as soon as it is accepted (its client sees UNAVAILABLE, and a
//     retrying client or a balancer tries elsewhere);
//   - survives EMFILE/ENFILE: it keeps a spare descriptor (/dev/null), and
//     when accept4 fails for want of descriptors it closes the spare,
//     accepts and closes the pending connection (so the client learns at
//     once instead of waiting in the backlog), reopens the spare and backs
//     off 10 ms;
//   - never gives up: every other accept4 error is logged (rate-limited) and
//     retried after a back-off.
// Live connections are counted without help from gRPC, which closes a
// connection's descriptor when the connection ends: the listener remembers
// (descriptor, inode) of each connection it handed over and sweeps the list
// with fstat (descriptor closed, or reused for another file = gone) when a
// new connection would pass the cap (at most every 5 ms), and once a second
// for the gauge. A sweep of 1,000 connections costs about 0.45 ms
// (tests/server/grpc/grpc_listener_test.cc prints it); finding the same
// sockets through /proc as server_sockets.cc does (/proc/net/tcp with 2,000
// loopback sockets, readlink of every descriptor) about 20 ms, which at the
// cap would be paid per accepted connection.
//
// Addresses are as gRPC names them: "host:port" (an IP literal, a name such
// as localhost: every address it resolves to; 0.0.0.0 and [::] bind the
// IPv6 wildcard in dual-stack mode where there is IPv6, as gRPC does; port
// 0 picks a free port), "unix:/path" and "unix-abstract:name".
//
// Thread-safety: Start and the accessors from any thread; Stop from one
// thread at a time (it is idempotent). The hand-off runs on the listener's
// thread only.
#ifndef TENSOROPS_SERVER_GRPC_GRPC_LISTENER_H_
#define TENSOROPS_SERVER_GRPC_GRPC_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tensorops {

class ConnectionMetrics;

class GrpcListener {
 public:
  struct Options {
    // The addresses to listen on (see above); at least one.
    std::vector<std::string> addresses;
    // Live connections at most (>= 1); one more is closed when accepted.
    int64_t max_connections = 1;
    // Takes each accepted connection (a connected, non-blocking socket);
    // owns the descriptor from then on and closes it when the connection
    // ends. Runs on the listener's thread.
    std::function<void(int fd)> hand_off;
    // tensorops_grpc_connections and tensorops_grpc_connections_refused_total
    // (RegisterGrpcConnections, grpc_metrics.h); may be null. Must outlive
    // the listener.
    const ConnectionMetrics* connections = nullptr;
  };

  // Binds and listens on every address, then starts accepting. An error
  // (UNAVAILABLE "cannot listen on ADDRESS: reason") when an address cannot
  // be bound; nothing is left open then.
  static absl::StatusOr<std::unique_ptr<GrpcListener>> Start(Options options);
  ~GrpcListener();  // Stop()
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  // The port the i-th address was bound to (port 0 resolved); 0 for a Unix
  // socket.
  int port(size_t i) const { return ports_[i]; }

  // Closes the listening sockets (connections waiting in their backlog are
  // reset; Unix socket files removed) and joins the thread. Connections
  // already handed over are left to gRPC. Idempotent.
  void Stop();

  // Live connections as of the last sweep or accept.
  int64_t connections() const { return live_count_.load(std::memory_order_relaxed); }
  // Connections closed at accept, over the cap and for want of descriptors.
  int64_t refused_at_cap() const { return refused_cap_.load(std::memory_order_relaxed); }
  int64_t refused_emfile() const { return refused_emfile_.load(std::memory_order_relaxed); }

  // Sweeps now (on the caller's thread; for tests and benchmarks) and
  // returns the live count.
  int64_t SweepForTest();

 private:
  struct Socket {
    int fd = -1;
    bool tcp = false;
    std::string unix_path;  // a filesystem socket to remove at Stop
    ino_t unix_inode = 0;   // ... only while it is still ours
  };
  struct Connection {
    int fd;
    ino_t inode;
    dev_t dev;
  };

  explicit GrpcListener(Options options);
  absl::Status Bind(const std::string& address, int* port);
  // Bind's three kinds of address; each returns why it failed ("": bound),
  // adds its sockets to sockets_ and sets *port to the bound TCP port.
  std::string BindUnix(const std::string& path, bool abstract);
  std::string BindWildcard(int want_port, int* port);  // 0.0.0.0, ::, *, ""
  std::string BindResolved(const std::string& host, int want_port, int* port);
  void Loop();
  // Accepts what is pending on `s`; false when the listener is dead (shut
  // down under us) and should not be polled again.
  bool AcceptAll(const Socket& s);
  void OnConnection(int fd, bool tcp);
  void OnOutOfDescriptors(const Socket& s, int error);
  // Drops connections whose descriptor is closed or now another file.
  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_);
  static bool IsGone(const Connection& c);
  void PublishCount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_);

  const Options options_;
  std::vector<Socket> sockets_;
  std::vector<int> ports_;
  int wake_fd_ = -1;   // eventfd: Stop wakes the loop
  int spare_fd_ = -1;  // /dev/null, given up to accept when out of descriptors
  std::thread thread_;
  absl::Mutex stop_mu_;
  bool stopped_ = false;

  // The connections handed over and not yet seen closed (the loop's thread
  // and SweepForTest).
  absl::Mutex live_mu_;
  std::vector<Connection> live_ ABSL_GUARDED_BY(live_mu_);
  // Loop-thread state (Start sets it before the thread starts).
  int64_t last_sweep_ns_ = 0;
  int64_t backoff_until_ns_ = 0;
  int64_t next_cap_log_ns_ = 0;
  int64_t next_emfile_log_ns_ = 0;
  int64_t next_error_log_ns_ = 0;
  int64_t cap_unlogged_ = 0;
  int64_t emfile_unlogged_ = 0;

  std::atomic<int64_t> live_count_{0};
  std::atomic<int64_t> refused_cap_{0};
  std::atomic<int64_t> refused_emfile_{0};
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_GRPC_LISTENER_H_
