// tensorops.v1.TensorOps over gRPC's callback API: the front doors of the
// tensorops.v1 protocol. Each one only translates its messages into an op
// call and the result back; the lifecycle every call shares (gate,
// admission, run-or-drop on the kernel pool, metrics, logs, finish) is
// server/core/call.h.
//
//   Execute        one request message -> PreparedExecution (server/execution.h)
//                  -> one response message; big outputs go out as their own
//                  slice (server/grpc/raw_unary.h);
//   ExecuteStream  chunked upload -> StreamedExecution (server/stream_execution.h)
//                  -> chunked download (server/stream_reactor.h, chunks in
//                  place by wire/stream_chunk.h);
//   ListOps        the registry's specs (gate only: it runs no kernel).
//
// Thread-safety: safe for concurrent RPCs.
#ifndef TENSOROPS_SERVER_GRPC_SERVICE_H_
#define TENSOROPS_SERVER_GRPC_SERVICE_H_

#include "server/core/call.h"
#include "server/grpc/grpc_metrics.h"
#include "server/grpc/unary_call.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace tensorops {

// Execute and ExecuteStream are registered raw (grpc::ByteBuffer messages)
// so their tensors move without protobuf copies (server/grpc/raw_unary.h,
// stream_reactor.h); their wire format is still the .proto's, and reflection
// describes them as usual.
using TensorOpsServiceBase =
    v1::TensorOps::WithRawCallbackMethod_Execute<v1::TensorOps::WithCallbackMethod_ListOps<
        v1::TensorOps::WithRawCallbackMethod_ExecuteStream<v1::TensorOps::Service>>>;

class TensorOpsService final : public TensorOpsServiceBase {
 public:
  // `pipeline` is not owned and must outlive the service. Registers the
  // door's methods with the pipeline's metrics.
  explicit TensorOpsService(CallPipeline* pipeline)
      : pipeline_(pipeline), methods_(GrpcMethods::Register(pipeline->metrics())) {
    // What the generated SetMessageAllocatorFor_Execute does for a typed
    // method (Execute is method 0 of the service).
    static_cast<grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>*>(
        grpc::Service::GetHandler(0))
        ->SetMessageAllocator(&execute_allocator_);
  }

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListOps(grpc::CallbackServerContext* ctx,
                                    const v1::ListOpsRequest* request,
                                    v1::ListOpsResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExecuteStream(
      grpc::CallbackServerContext* ctx) override;

 private:
  CallPipeline* const pipeline_;
  const GrpcMethods methods_;
  UnaryCallAllocator<v1::ExecuteRequest, v1::ExecuteResponse> execute_allocator_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_SERVICE_H_
