#include "server/grpc/service.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "kernels/status_macros.h"
#include "server/core/logging.h"
#include "server/grpc/grpc_call_context.h"
#include "server/grpc/stream_reactor.h"
#include "server/v1/execution.h"
#include "wire/status.h"
#include "wire/tensor_codec.h"

namespace tensorops {

namespace {

// An Execute call whose reply is written by Run: a raw output of at least
// kSliceReplyMinBytes into a buffer of its own that goes out as a slice after
// the reply's header, anything else through the response message.
class ExecuteReply final : public PreparedCall {
 public:
  ExecuteReply(std::unique_ptr<PreparedExecution> exec, v1::ExecuteResponse* response,
               grpc::ByteBuffer* reply)
      : exec_(std::move(exec)), response_(response), reply_(reply) {}

  int64_t output_bytes() const override { return exec_->output_bytes(); }
  int64_t scratch_bytes() const override { return exec_->scratch_bytes(); }
  absl::Span<const OpDef* const> chain() const override { return exec_->chain(); }

  absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
    const int64_t bytes = exec_->output_bytes();
    if (!exec_->raw_output() || bytes < kSliceReplyMinBytes) {
      exec_->Run(response_, pool, min_parallel_bytes);
      return SerializeReply(*response_, reply_);
    }
    SliceBuffer out(bytes);
    exec_->RunRaw(out.data(), pool, min_parallel_bytes);
    // ExecuteResponse{outputs: [Tensor{dtype, shape, raw_data}]} as
    // protobuf writes it: raw_data (3) is the tensor's last field set.
    v1::Tensor header;
    header.set_dtype(ToProtoDataType(exec_->output_dtype()));
    for (int64_t d : exec_->output_shape()) header.add_shape(d);
    std::string tensor = header.SerializeAsString();
    AppendLengthDelimited(3, static_cast<uint64_t>(bytes), &tensor);
    std::string head;
    AppendLengthDelimited(1, tensor.size() + static_cast<uint64_t>(bytes), &head);
    head += tensor;
    std::vector<grpc::Slice> parts;
    parts.push_back(out.Release());
    SetReply(head, std::move(parts), reply_);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PreparedExecution> exec_;
  v1::ExecuteResponse* const response_;
  grpc::ByteBuffer* const reply_;
};

absl::string_view OpOf(const v1::ExecuteRequest& request) { return request.op(); }

}  // namespace

grpc::ServerUnaryReactor* TensorOpsService::Execute(grpc::CallbackServerContext* ctx,
                                                    const grpc::ByteBuffer* /*request*/,
                                                    grpc::ByteBuffer* /*response*/) {
  // Parsed, decoded and validated on this gRPC thread (cheap), then run
  // inline (small outputs) or on the pool; the reply is encoded where it runs.
  return UnaryCallAllocator<v1::ExecuteRequest, v1::ExecuteResponse>::Start(
      pipeline_, methods_.execute, ctx, &OpOf,
      [&](const v1::ExecuteRequest& request, v1::ExecuteResponse* response,
          grpc::ByteBuffer* reply) -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
        ASSIGN_OR_RETURN(
            std::unique_ptr<PreparedExecution> exec,
            PreparedExecution::Make(pipeline_->registry(), request, pipeline_->limits()));
        return std::make_unique<ExecuteReply>(std::move(exec), response, reply);
      });
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
