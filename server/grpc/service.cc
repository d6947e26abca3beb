#include "server/grpc/service.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "kernels/status_macros.h"
#include "server/core/execution.h"
#include "server/core/logging.h"
#include "server/grpc/stream_reactor.h"
#include "wire/status.h"

namespace tensorops {
namespace {

// Execute: the request message is decoded and validated on the gRPC thread
// (cheap), then the call runs on the pool and the response is encoded there.
class ExecuteReactor final : public grpc::ServerUnaryReactor {
 public:
  ExecuteReactor(CallPipeline* pipeline, grpc::CallbackServerContext* ctx,
                 const v1::ExecuteRequest* request, v1::ExecuteResponse* response)
      : call_(pipeline, CallMethod::kExecute, ctx,
              [this](const grpc::Status& status) { Finish(status); }) {
    call_.RunUnary(
        request->op(), static_cast<int64_t>(request->ByteSizeLong()),
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          ASSIGN_OR_RETURN(
              std::unique_ptr<PreparedExecution> exec,
              PreparedExecution::Make(pipeline->registry(), *request, pipeline->limits()));
          return IntoReply(std::move(exec), response);
        },
        [response] { return static_cast<int64_t>(response->ByteSizeLong()); });
  }

  void OnDone() override { delete this; }

 private:
  Call call_;
};

}  // namespace

grpc::ServerUnaryReactor* TensorOpsService::Execute(grpc::CallbackServerContext* ctx,
                                                    const v1::ExecuteRequest* request,
                                                    v1::ExecuteResponse* response) {
  return new ExecuteReactor(pipeline_, ctx, request, response);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpsService::ExecuteStream(
    grpc::CallbackServerContext* ctx) {
  return NewExecuteStreamReactor(pipeline_, ctx);
}

grpc::ServerUnaryReactor* TensorOpsService::ListOps(grpc::CallbackServerContext* ctx,
                                                    const v1::ListOpsRequest*,
                                                    v1::ListOpsResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const absl::Status gate = pipeline_->Gate(*ctx);
  if (gate.ok()) {
    DescribeOps(pipeline_->registry(), response);
  } else if (gate.code() == absl::StatusCode::kUnauthenticated) {
    LogRequestError(grpc::StatusCode::UNAUTHENTICATED, "none", std::string(gate.message()));
  }
  const grpc::Status status = ToGrpcStatus(gate);
  pipeline_->metrics()->RecordListOps(status.error_code(),
                                      absl::ToDoubleSeconds(absl::Now() - start));
  reactor->Finish(status);
  return reactor;
}

}  // namespace tensorops
