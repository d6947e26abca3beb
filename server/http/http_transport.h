// The HTTP/1.1 transport under the REST door, knowing no protocol above it:
// Boost.Asio event-loop threads (Options::loops), one acceptor handing
// connections to them in turn, the connection table and its cap, each
// connection's header, idle and body-rate deadlines, the bodies' in-flight
// budget, EMFILE shedding, TLS. Each request read whole goes to the
// protocol's handler (HttpProtocol::route, http_message.h); the server
// (server/http/http_server.h) gives it the Open Inference Protocol's routes.
//
// Thread-safety: Start and Stop from one thread; the loops run on their own
// and share only thread-safe state (the pipeline, the connection table).
#ifndef TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_
#define TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/core/call.h"
#include "server/http/http_message.h"
#include "server/http/transport_options.h"

namespace tensorops {

class HttpTransport {
 public:
  using Options = HttpTransportOptions;

  // Binds and starts the loops. `pipeline` (the bodies' budget, the
  // connection metrics) is not owned and must outlive the transport; the
  // protocol's functions are called on the loops' threads.
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Start(CallPipeline* pipeline,
                                                              HttpProtocol protocol,
                                                              const Options& options);
  // Stop(), then the connections close.
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  int port() const { return port_; }

  // Stops the loops and joins them; connections close with the transport.
  // Idempotent.
  void Stop();

 private:
  class Impl;  // http_transport.cc: Boost stays out of this header
  explicit HttpTransport(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_
