#include "server/http/http_server.h"

#include <utility>

#include "server/http/connection_metrics.h"
#include "server/http/http_transport.h"
#include "server/http/infer_call.h"
#include "server/http/json_binding.h"
#include "server/http/oip_json.h"
#include "server/http/oip_routes.h"

namespace tensorops {

// The door: the Open Inference Protocol's routes over the transport, which
// calls them. Declared in this order so the transport (and its connections)
// goes first.
class HttpServerImpl {
 public:
  HttpServerImpl(CallPipeline* pipeline, OipService* oip) : routes(pipeline, oip) {}

  OipRoutes routes;
  std::unique_ptr<HttpTransport> transport;
};

namespace {

// REST's words for what the transport refuses itself: {"error": why}, and
// the status of a budget refusal as any error's (503, or 413 naming a
// --max_ flag).
HttpProtocol RestProtocol(const OipRoutes* routes) {
  HttpProtocol p;
  p.route = [routes](HttpRequest request, HttpExecutor loop, Reply reply) {
    routes->Route(std::move(request), std::move(loop), std::move(reply));
  };
  p.error = [](int status, absl::string_view why) { return JsonResponse(status, ErrorJson(why)); };
  p.status_of = [](const absl::Status& s) { return HttpStatusOf(s); };
  return p;
}

}  // namespace

HttpServer::HttpServer(std::unique_ptr<HttpServerImpl> impl) : impl_(std::move(impl)) {}

void HttpServer::RegisterMetrics(Metrics* metrics) {
  RegisterInferMethod(metrics);
  RegisterHttpConnections(metrics);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(CallPipeline* pipeline,
                                                              OipService* oip,
                                                              const Options& options) {
  auto impl = std::make_unique<HttpServerImpl>(pipeline, oip);
  absl::StatusOr<std::unique_ptr<HttpTransport>> transport =
      HttpTransport::Start(pipeline, RestProtocol(&impl->routes), options);
  if (!transport.ok()) return transport.status();
  impl->transport = *std::move(transport);
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(impl)));
  s->port_ = s->impl_->transport->port();
  s->max_connections_ = options.max_connections;
  return s;
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  impl_->transport->Stop();
}

HttpServer::~HttpServer() {
  Stop();
  // The connections close with the transport, before the routes they call.
  impl_->transport.reset();
}

}  // namespace tensorops
