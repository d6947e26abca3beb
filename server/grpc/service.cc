#include "server/grpc/service.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "kernels/status_macros.h"
#include "server/core/logging.h"
#include "server/grpc/grpc_call_context.h"
#include "server/grpc/stream_reactor.h"
#include "server/v1/execution.h"
#include "wire/status.h"

namespace tensorops {

grpc::ServerUnaryReactor* TensorOpsService::Execute(grpc::CallbackServerContext* ctx,
                                                    const v1::ExecuteRequest* request,
                                                    v1::ExecuteResponse* response) {
  // Decoded and validated on this gRPC thread (cheap), then run inline
  // (small outputs) or on the pool; the response is encoded where it runs.
  return UnaryCallAllocator<v1::ExecuteRequest, v1::ExecuteResponse>::Start(
      pipeline_, methods_.execute, ctx, request->op(),
      static_cast<int64_t>(request->ByteSizeLong()),
      [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
        ASSIGN_OR_RETURN(
            std::unique_ptr<PreparedExecution> exec,
            PreparedExecution::Make(pipeline_->registry(), *request, pipeline_->limits()));
        return IntoReply(std::move(exec), response);
      },
      [response] { return static_cast<int64_t>(response->ByteSizeLong()); });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpsService::ExecuteStream(
    grpc::CallbackServerContext* ctx) {
  return NewExecuteStreamReactor(pipeline_, methods_.execute_stream, ctx);
}

grpc::ServerUnaryReactor* TensorOpsService::ListOps(grpc::CallbackServerContext* ctx,
                                                    const v1::ListOpsRequest*,
                                                    v1::ListOpsResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const absl::Status gate = pipeline_->Gate(GrpcCallContext(ctx));
  if (gate.ok()) {
    DescribeOps(pipeline_->registry(), response);
  } else if (gate.code() == absl::StatusCode::kUnauthenticated) {
    LogRequestError(absl::StatusCode::kUnauthenticated, "none", std::string(gate.message()));
  }
  const grpc::Status status = ToGrpcStatus(gate, ctx);
  pipeline_->metrics()->RecordCall(methods_.list_ops, 0, gate.code(),
                                   absl::ToDoubleSeconds(absl::Now() - start), 0, 0);
  reactor->Finish(status);
  return reactor;
}

}  // namespace tensorops
