#include "server/grpc/service.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
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
              [this](const grpc::Status& status) { Finish(status); }),
        request_(request),
        response_(response),
        request_bytes_(static_cast<int64_t>(request->ByteSizeLong())) {
    const CallPipeline& p = *pipeline;
    call_.SetOp(request->op(), p.registry().Find(request->op()));
    if (absl::Status s = call_.Open(); !s.ok()) {
      End(s);
      return;
    }
    absl::StatusOr<std::unique_ptr<PreparedExecution>> exec =
        PreparedExecution::Make(p.registry(), *request_, p.limits());
    if (!exec.ok()) {
      End(exec.status());
      return;
    }
    exec_ = *std::move(exec);
    const int64_t output_bytes = exec_->output_bytes();
    if (absl::Status s =
            call_.Admit(request_bytes_ + output_bytes, AdmissionController::Queue::kNow);
        !s.ok()) {
      End(s);
      return;
    }
    call_.Run(
        output_bytes,
        [this](ThreadPool* pool, int64_t min_parallel_bytes) {
          exec_->Run(response_, pool, min_parallel_bytes);
          return absl::OkStatus();
        },
        [this](absl::Status status) { End(status); });
  }

  void OnDone() override { delete this; }

 private:
  void End(const absl::Status& status) {
    exec_.reset();  // views of the request: gone before the RPC ends
    call_.Finish(status, request_bytes_,
                 status.ok() ? static_cast<int64_t>(response_->ByteSizeLong()) : 0);
  }

  Call call_;
  const v1::ExecuteRequest* const request_;
  v1::ExecuteResponse* const response_;
  const int64_t request_bytes_;
  std::unique_ptr<PreparedExecution> exec_;
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
