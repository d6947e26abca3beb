// The Open Inference Protocol's HTTP/REST endpoints (../shared/api-rest.md
// "Endpoints") as routes over the transport (server/http/http_transport.h):
// a table of (verb, path pattern, handler); each handler renders one of
// OipService's values (server/oip/oip_service.h) as JSON
// (server/http/oip_json.h), but infer, which runs a Call
// (server/http/infer_call.h). Knows no sockets: it sees an HttpRequest read
// whole and answers through its Reply.
//
// Health live/ready are open (no token) and ready answers 503 while the
// server drains; everything else needs the token when one is configured and
// gets 503 while draining (an infer's Call checks both, so that a refused
// infer is counted as a refused ModelInfer is). A path no route has is 404
// and a route's path with another method 405 (with Allow). Shared memory
// off, status lists nothing and register/unregister are 501.
//
// Thread-safety: Route is safe from any number of loop threads at once.
#ifndef TENSOROPS_SERVER_HTTP_OIP_ROUTES_H_
#define TENSOROPS_SERVER_HTTP_OIP_ROUTES_H_

#include "server/core/call.h"
#include "server/http/http_message.h"
#include "server/http/infer_call.h"
#include "server/oip/oip_service.h"

namespace tensorops {

class OipRoutes {
 public:
  // Neither pointer is owned; both must outlive the routes. Registers the
  // infer's method with the pipeline's metrics.
  OipRoutes(CallPipeline* pipeline, OipService* oip)
      : pipeline_(pipeline), oip_(oip), infer_method_(RegisterInferMethod(pipeline->metrics())) {}

  // The transport's handler (HttpHandler): answers `request` through
  // `reply`, once, on `loop` (an infer's answer comes back through it).
  void Route(HttpRequest request, HttpExecutor loop, Reply reply) const;

 private:
  CallPipeline* const pipeline_;
  OipService* const oip_;
  const CallMethod* const infer_method_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_OIP_ROUTES_H_
