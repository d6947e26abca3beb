#include "server/service.h"

#include "server/execution.h"
#include "server/status_util.h"

namespace tensorops {

grpc::ServerUnaryReactor* TensorOpsService::Execute(grpc::CallbackServerContext* ctx,
                                                    const v1::ExecuteRequest* request,
                                                    v1::ExecuteResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(tensorops::Execute(*registry_, *request, response)));
  return reactor;
}

grpc::ServerUnaryReactor* TensorOpsService::ListOps(grpc::CallbackServerContext* ctx,
                                                    const v1::ListOpsRequest*,
                                                    v1::ListOpsResponse* response) {
  DescribeOps(*registry_, response);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tensorops
