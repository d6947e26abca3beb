// The REST door's infer (POST /v2/models/{m}[/versions/{v}]/infer): the
// body translated by server/http/json_binding.h into an InferRequest, run on
// the Call lifecycle every front door shares (server/core/call.h: bearer
// token, drain gate, admission, the kernel inline or on the pool, metrics
// under method="REST", access log); the thread that finishes it encodes the
// answer and posts it to the connection's loop, which writes the JSON and
// the binary outputs without copying them, holding the call's ticket (shrunk
// to the answer's bytes) until they are written.
//
// Thread-safety: StartInferCall on the connection's loop thread; the reply
// comes on that thread too.
#ifndef TENSOROPS_SERVER_HTTP_INFER_CALL_H_
#define TENSOROPS_SERVER_HTTP_INFER_CALL_H_

#include <string>

#include "server/core/call.h"
#include "server/http/http_message.h"
#include "server/oip/oip_service.h"

namespace tensorops {

// The infer's method in the server's metrics (method="REST": body and
// answer sizes), registered; the same handle however often.
const CallMethod* RegisterInferMethod(Metrics* metrics);

// Runs the infer of `request` on `model` (`version`: empty for any) as a
// call of `method` (RegisterInferMethod's) and answers through `reply`,
// once, on `loop`. No pointer is owned; each must outlive the call.
void StartInferCall(CallPipeline* pipeline, const CallMethod* method, const OipService* oip,
                    HttpRequest request, HttpExecutor loop, Reply reply, const std::string& model,
                    const std::string& version);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_INFER_CALL_H_
