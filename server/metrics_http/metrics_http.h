// GET /metrics over HTTP: prometheus-cpp's Exposer (civetweb) serving a
// registry (server/core/metrics.h's), and the stop that does not wait for
// civetweb's poll round. A room of its own: core/ keeps the metrics and
// opens no socket.
//
// Thread-safety: Start and Stop from one thread (the server's start and
// stop); the Exposer serves scrapes on threads of its own.
#ifndef TENSOROPS_SERVER_METRICS_HTTP_METRICS_HTTP_H_
#define TENSOROPS_SERVER_METRICS_HTTP_METRICS_HTTP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace tensorops {

class MetricsHttpServer {
 public:
  // Serves `registry` (shared: it lives as long as this).
  explicit MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Serves GET /metrics on host:port (port 0 picks a free one). Returns the
  // bound port. At most once: FAILED_PRECONDITION after; UNAVAILABLE naming
  // the address when it cannot bind.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Stops serving /metrics, within milliseconds. Idempotent.
  void Stop();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;  // as Start was given it
  int port_ = -1;     // bound
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_METRICS_HTTP_METRICS_HTTP_H_
