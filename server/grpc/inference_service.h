// The Open Inference Protocol (KServe v2) front door: inference.GRPCInferenceService
// on the same port as tensorops.v1.TensorOps, for Triton/KServe clients.
//
// A thin front door like Execute's: ModelInfer decodes a ModelInferRequest
// into a PreparedInfer (server/grpc/oip_binding.h -> server/oip/oip_codec.h) and runs it through
// the call lifecycle every front door shares (server/core/call.h: bearer token, drain gate,
// admission, run-or-drop on the kernel pool, deadlines, metrics with
// method="ModelInfer", access log). ModelStreamInfer runs each request
// message of a stream as one such call, one after another, and answers in
// order; a request that fails gets a response with error_message and the
// stream goes on (a missing token, the drain or the stream's own deadline end
// the stream with that status instead).
//
// ServerLive and ServerReady are open like grpc.health.v1 (no token) and
// agree with it: ready turns false when the drain starts, after which the
// server stops and calls get UNAVAILABLE. Every other RPC needs the token and
// is refused with UNAVAILABLE while draining. The shared-memory RPCs work on
// the caller's own regions (owner: its bearer token) and answer UNAVAILABLE
// unless --shared_memory=system.
//
// Thread-safety: safe for concurrent RPCs.
#ifndef TENSOROPS_SERVER_GRPC_INFERENCE_SERVICE_H_
#define TENSOROPS_SERVER_GRPC_INFERENCE_SERVICE_H_

#include <string>

#include "inference/grpc_service.grpc.pb.h"
#include "server/core/call.h"
#include "server/grpc/grpc_metrics.h"
#include "server/grpc/unary_call.h"
#include "server/oip/oip_service.h"
#include "server/oip/shm_registry.h"

namespace tensorops {

// GRPCInferenceService::CallbackService with ModelInfer registered raw
// (grpc::ByteBuffer messages, the same wire format) so its tensors move
// without protobuf's reply copies (server/grpc/raw_unary.h).
namespace inference_bases {
using G = inference::GRPCInferenceService;
using Service = G::WithCallbackMethod_ServerLive<
    G::WithCallbackMethod_ServerReady<G::WithCallbackMethod_ModelReady<
        G::WithCallbackMethod_ServerMetadata<G::WithCallbackMethod_ModelMetadata<
            G::WithRawCallbackMethod_ModelInfer<G::WithCallbackMethod_ModelStreamInfer<
                G::WithCallbackMethod_ModelStatistics<G::WithCallbackMethod_RepositoryIndex<
                    G::WithCallbackMethod_SystemSharedMemoryStatus<
                        G::WithCallbackMethod_SystemSharedMemoryRegister<
                            G::WithCallbackMethod_SystemSharedMemoryUnregister<
                                G::Service>>>>>>>>>>>>;
}  // namespace inference_bases

class InferenceService final : public inference_bases::Service {
 public:
  // Neither pointer is owned; both must outlive the service. The control
  // RPCs are renderings of `oip`'s values; infer reads its shared memory.
  InferenceService(CallPipeline* pipeline, OipService* oip)
      : pipeline_(pipeline),
        oip_(oip),
        shm_(oip->shm()),
        methods_(GrpcMethods::Register(pipeline->metrics())) {
    // What the generated SetMessageAllocatorFor_ModelInfer does for a typed
    // method (ModelInfer is method 5 of the service).
    static_cast<grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>*>(
        grpc::Service::GetHandler(5))
        ->SetMessageAllocator(&infer_allocator_);
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
      inference::SystemSharedMemoryStatusResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
      inference::SystemSharedMemoryRegisterResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx,
      const inference::SystemSharedMemoryUnregisterRequest* request,
      inference::SystemSharedMemoryUnregisterResponse* response) override;

 private:
  // The caller's identity for shared-memory regions (OipService::ShmOwner
  // of its authorization metadata, already checked by the gate).
  std::string ShmOwner(const grpc::CallbackServerContext& ctx) const;

  CallPipeline* const pipeline_;
  OipService* const oip_;
  const ShmRegistry* const shm_;
  const GrpcMethods methods_;
  UnaryCallAllocator<inference::ModelInferRequest, inference::ModelInferResponse> infer_allocator_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_INFERENCE_SERVICE_H_
