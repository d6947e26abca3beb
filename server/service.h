// tensorops.v1.TensorOps over gRPC's callback API. Handlers are thin: the
// request path lives in execution.h, status mapping in status_util.h.
//
// Thread-safety: safe for concurrent RPCs; the registry is read-only.
#ifndef TENSOROPS_SERVER_SERVICE_H_
#define TENSOROPS_SERVER_SERVICE_H_

#include "kernels/op_registry.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace tensorops {

class TensorOpsService final : public v1::TensorOps::CallbackService {
 public:
  explicit TensorOpsService(const OpRegistry* registry) : registry_(registry) {}

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx,
                                    const v1::ExecuteRequest* request,
                                    v1::ExecuteResponse* response) override;
  grpc::ServerUnaryReactor* ListOps(grpc::CallbackServerContext* ctx,
                                    const v1::ListOpsRequest* request,
                                    v1::ListOpsResponse* response) override;

 private:
  const OpRegistry* registry_;  // not owned
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_SERVICE_H_
