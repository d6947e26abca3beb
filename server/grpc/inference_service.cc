#include "server/grpc/inference_service.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/status_macros.h"
#include "server/core/logging.h"
#include "server/grpc/grpc_call_context.h"
#include "server/grpc/oip_binding.h"
#include "wire/status.h"

namespace tensorops {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

// The unary RPCs that run no kernel: the gate (token, drain), then `fn`.
template <typename Fn>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, CallPipeline* pipeline, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status status = pipeline->Gate(GrpcCallContext(ctx));
  if (status.ok()) status = fn();
  reactor->Finish(ToGrpcStatus(status, ctx));
  return reactor;
}

// ServerLive and ServerReady: open like grpc.health.v1 (no token, no drain gate).
grpc::ServerUnaryReactor* Ungated(grpc::CallbackServerContext* ctx) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void Describe(const OipTensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(t.name);
  out->set_datatype(t.datatype);
  for (int64_t d : t.shape) out->add_shape(d);
}

void Describe(const OipDuration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

using StreamReactor = grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>;

// ModelStreamInfer: one request message at a time (read -> call -> write ->
// read), so responses come in request order and at most one callback runs
// at any time (no lock).
class ModelStreamInferReactor final : public StreamReactor {
 public:
  ModelStreamInferReactor(CallPipeline* pipeline, const CallMethod* method, const ShmRegistry* shm,
                          std::string owner, grpc::CallbackServerContext* ctx)
      : pipeline_(pipeline),
        method_(method),
        shm_(shm),
        owner_(std::move(owner)),
        ctx_(ctx),
        call_context_(ctx) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side: every request has been answered
      StreamReactor::Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    call_ = std::make_unique<Call>(pipeline_, method_, &call_context_,
                                   [this](const absl::Status& status) { Respond(status); });
    call_->RunUnary(
        request_.model_name(), static_cast<int64_t>(request_.ByteSizeLong()),
        [this]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          ASSIGN_OR_RETURN(std::unique_ptr<PreparedInfer> exec,
                           PrepareModelInfer(pipeline_->registry(), request_, pipeline_->limits(),
                                             shm_, owner_));
          return ModelInferCall(std::move(exec), response_.mutable_infer_response());
        },
        [this] { return static_cast<int64_t>(response_.ByteSizeLong()); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      StreamReactor::Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its response"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  // The Call's "finish": answer this request and go on, or end the stream
  // when the failure concerns the stream itself (token, drain, its deadline,
  // cancellation).
  void Respond(const absl::Status& status) {
    switch (status.code()) {
      case absl::StatusCode::kOk:
        break;
      case absl::StatusCode::kDeadlineExceeded:
        // The stream's own deadline ends it; a message's `timeout` parameter
        // fails only that message.
        if (ctx_->deadline() > std::chrono::system_clock::now()) {
          RespondError(status);
          break;
        }
        [[fallthrough]];
      case absl::StatusCode::kUnauthenticated:
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kCancelled:
        StreamReactor::Finish(ToGrpcStatus(status, ctx_));
        return;
      default:
        RespondError(status);
        break;
    }
    StartWrite(&response_);
  }

  // This message's error, in the stream's response (the stream goes on).
  void RespondError(const absl::Status& status) {
    response_.Clear();
    response_.set_error_message(
        absl::StrCat(StatusCodeName(status.code()), ": ", status.message()));
  }

  CallPipeline* const pipeline_;
  const CallMethod* const method_;  // ModelStreamInfer's
  const ShmRegistry* const shm_;
  const std::string owner_;
  grpc::CallbackServerContext* const ctx_;
  const GrpcCallContext call_context_;  // every message's Call's
  ModelInferRequest request_;
  ModelStreamInferResponse response_;
  std::unique_ptr<Call> call_;  // this message's
};

}  // namespace

std::string InferenceService::ShmOwner(const grpc::CallbackServerContext& ctx) const {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return oip_->ShmOwner(std::nullopt);
  return oip_->ShmOwner(absl::string_view(it->second.data(), it->second.size()));
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* ctx,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  response->set_live(oip_->ServerLive());
  return Ungated(ctx);
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* ctx,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  // False from the moment the drain starts (health then answers
  // NOT_SERVING; new calls get UNAVAILABLE), but the RPC itself answers OK.
  response->set_ready(oip_->ServerReady());
  return Ungated(ctx);
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    RETURN_IF_ERROR(oip_->Model(request->name(), request->version()).status());
    response->set_ready(true);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return Answer(ctx, pipeline_, [&] {
    OipServerMetadata m = oip_->ServerMetadata(OipDoor::kGrpc);
    response->set_name(std::move(m.name));
    response->set_version(std::move(m.version));
    for (std::string& e : m.extensions) response->add_extensions(std::move(e));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(OipModelMetadata m, oip_->ModelMetadata(request->name(), request->version()));
    response->set_name(std::move(m.name));
    for (std::string& v : m.versions) response->add_versions(std::move(v));
    response->set_platform(std::move(m.platform));
    for (const OipTensorMetadata& t : m.inputs) Describe(t, response->add_inputs());
    for (const OipTensorMetadata& t : m.outputs) Describe(t, response->add_outputs());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* /*request*/,
                                                       grpc::ByteBuffer* /*response*/) {
  // Parsed, decoded and validated on this gRPC thread, then run inline
  // (small outputs) or on the pool (server/grpc/raw_unary.h).
  const std::string owner = ShmOwner(*ctx);
  return UnaryCallAllocator<ModelInferRequest, ModelInferResponse>::Start(
      pipeline_, methods_.model_infer, ctx,
      [](const ModelInferRequest& request) -> absl::string_view { return request.model_name(); },
      [&](const ModelInferRequest& request, ModelInferResponse* response,
          grpc::ByteBuffer* reply) -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
        ASSIGN_OR_RETURN(
            std::unique_ptr<PreparedInfer> exec,
            PrepareModelInfer(pipeline_->registry(), request, pipeline_->limits(), shm_, owner));
        return ModelInferReplyCall(std::move(exec), response, reply);
      });
}

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  return new ModelStreamInferReactor(pipeline_, methods_.model_stream_infer, shm_, ShmOwner(*ctx),
                                     ctx);
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    grpc::CallbackServerContext* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<OipModelStats> stats,
                     oip_->ModelStatistics(request->name(), request->version()));
    for (OipModelStats& s : stats) {
      inference::ModelStatistics* m = response->add_model_stats();
      m->set_name(std::move(s.name));
      m->set_version(std::move(s.version));
      m->set_last_inference(s.last_inference);
      m->set_inference_count(s.inference_count);
      m->set_execution_count(s.execution_count);
      // compute_input and compute_output stay unset (zero).
      inference::InferStatistics* i = m->mutable_inference_stats();
      Describe(s.success, i->mutable_success());
      Describe(s.fail, i->mutable_fail());
      Describe(s.queue, i->mutable_queue());
      Describe(s.compute_infer, i->mutable_compute_infer());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    grpc::CallbackServerContext* ctx, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  return Answer(ctx, pipeline_, [&] {
    for (OipModelIndex& e : oip_->RepositoryIndex(request->ready())) {
      inference::RepositoryIndexResponse::ModelIndex* m = response->add_models();
      m->set_name(std::move(e.name));
      m->set_version(std::move(e.version));
      m->set_state(std::move(e.state));
      m->set_reason(std::move(e.reason));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<OipShmRegionStatus> regions,
                     oip_->SystemSharedMemoryStatus(ShmOwner(*ctx), request->name()));
    for (OipShmRegionStatus& r : regions) {
      auto& status = (*response->mutable_regions())[r.name];
      status.set_name(std::move(r.name));
      status.set_key(std::move(r.key));
      status.set_offset(r.offset);
      status.set_byte_size(r.byte_size);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  return Answer(ctx, pipeline_, [&] {
    return oip_->SystemSharedMemoryRegister(ShmOwner(*ctx), request->name(), request->key(),
                                            request->offset(), request->byte_size());
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return Answer(ctx, pipeline_, [&] {
    return oip_->SystemSharedMemoryUnregister(ShmOwner(*ctx), request->name());
  });
}

}  // namespace tensorops
