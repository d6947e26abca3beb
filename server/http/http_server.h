// The HTTP/REST door: the Open Inference Protocol (KServe v2 / Triton's HTTP
// endpoints, ../shared/api-rest.md) over HTTP/1.1, built of two halves that
// meet at one seam, Route(request, executor, reply)
// (server/http/http_message.h):
//
//   the transport (server/http/http_transport.h; the library
//   tensorops_http_transport): event loops, accept, connections, their
//   deadlines and cap, the bodies' in-flight budget, TLS. It knows no
//   protocol: no OIP, no JSON (the tests http_transport_links_no_oip and
//   http_transport_includes_no_oip);
//
//   the routes (server/http/oip_routes.h; tensorops_http_routes): a table of
//   (verb, path pattern, handler) rendering OipService's values as JSON
//   (oip_json.h), and the infer (infer_call.h: the body through
//   json_binding.h into an InferRequest, run on the Call lifecycle every door
//   shares, metrics under method="REST"). They know no sockets.
//
// HttpServer wires the routes over the transport and words what the
// transport refuses on its own (400, 408, 413, 431, 503) as REST does, a
// JSON {"error": "..."} body. Its rows on /metrics (the infer's method, the
// connections) it registers itself (RegisterMetrics).
//
// Thread-safety: Start and Stop from one thread; the loops run on their own
// and share only thread-safe state (the pipeline, the shm registry).
#ifndef TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
#define TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/core/call.h"
#include "server/http/tls_context.h"
#include "server/http/transport_options.h"
#include "server/oip/oip_service.h"

namespace tensorops {

class HttpServerImpl;  // http_server.cc: Boost stays out of this header

class HttpServer {
 public:
  // The door's address and limits (transport_options.h documents each).
  using Options = HttpTransportOptions;
  static constexpr int kMaxDefaultLoops = HttpTransportOptions::kMaxDefaultLoops;

  // The door's rows in `metrics` (its infer method, its connections), at
  // zero: the server registers them at start, also with the door off, so
  // /metrics lists the same families either way. Start registers them too.
  static void RegisterMetrics(Metrics* metrics);

  // Binds and starts the loops. Neither pointer is owned; both must outlive
  // the server. The control endpoints are renderings of `oip`'s values.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(CallPipeline* pipeline, OipService* oip,
                                                           const Options& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Options::max_connections (0: no cap).
  int64_t max_connections() const { return max_connections_; }

  // Stops the loops (connections close) and joins them. Calls still in
  // flight must have finished (the drain waits for them). Idempotent.
  void Stop();

 private:
  explicit HttpServer(std::unique_ptr<HttpServerImpl> impl);

  std::unique_ptr<HttpServerImpl> impl_;
  int port_ = 0;
  int64_t max_connections_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
