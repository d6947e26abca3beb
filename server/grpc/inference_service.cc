#include "server/grpc/inference_service.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/status_macros.h"
#include "server/core/logging.h"
#include "server/grpc/oip_binding.h"
#include "wire/status.h"

#ifndef TENSOROPS_VERSION
#error "TENSOROPS_VERSION must be defined by the build (server/CMakeLists.txt)"
#endif

namespace tensorops {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

// The unary RPCs that run no kernel: the gate (token, drain), then `fn`.
template <typename Fn>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, CallPipeline* pipeline, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status status = pipeline->Gate(*ctx);
  if (status.ok()) status = fn();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// ModelInfer: decoded and validated on the gRPC thread, run on the pool.
class ModelInferReactor final : public grpc::ServerUnaryReactor {
 public:
  ModelInferReactor(CallPipeline* pipeline, const ShmRegistry* shm, const std::string& owner,
                    grpc::CallbackServerContext* ctx, const ModelInferRequest* request,
                    ModelInferResponse* response)
      : call_(pipeline, CallMethod::kModelInfer, ctx,
              [this](const grpc::Status& status) { Finish(status); }) {
    call_.RunUnary(
        request->model_name(), static_cast<int64_t>(request->ByteSizeLong()),
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          ASSIGN_OR_RETURN(
              std::unique_ptr<PreparedInfer> exec,
              PrepareModelInfer(pipeline->registry(), *request, pipeline->limits(), shm, owner));
          return ModelInferCall(std::move(exec), response);
        },
        [response] { return static_cast<int64_t>(response->ByteSizeLong()); });
  }

  void OnDone() override { delete this; }

 private:
  Call call_;
};

using StreamReactor = grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>;

// ModelStreamInfer: one request message at a time (read -> call -> write ->
// read), so responses come in request order and at most one callback runs
// at any time (no lock).
class ModelStreamInferReactor final : public StreamReactor {
 public:
  ModelStreamInferReactor(CallPipeline* pipeline, const ShmRegistry* shm, std::string owner,
                          grpc::CallbackServerContext* ctx)
      : pipeline_(pipeline), shm_(shm), owner_(std::move(owner)), ctx_(ctx) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side: every request has been answered
      StreamReactor::Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    call_ = std::make_unique<Call>(pipeline_, CallMethod::kModelStreamInfer, ctx_,
                                   [this](const grpc::Status& status) { Respond(status); });
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
  void Respond(const grpc::Status& status) {
    switch (status.error_code()) {
      case grpc::StatusCode::OK:
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        // The stream's own deadline ends it; a message's `timeout` parameter
        // fails only that message.
        if (ctx_->deadline() > std::chrono::system_clock::now()) {
          RespondError(status);
          break;
        }
        [[fallthrough]];
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::CANCELLED:
        StreamReactor::Finish(status);
        return;
      default:
        RespondError(status);
        break;
    }
    StartWrite(&response_);
  }

  // This message's error, in the stream's response (the stream goes on).
  void RespondError(const grpc::Status& status) {
    response_.Clear();
    response_.set_error_message(
        absl::StrCat(StatusCodeName(status.error_code()), ": ", status.error_message()));
  }

  CallPipeline* const pipeline_;
  const ShmRegistry* const shm_;
  const std::string owner_;
  grpc::CallbackServerContext* const ctx_;
  ModelInferRequest request_;
  ModelStreamInferResponse response_;
  std::unique_ptr<Call> call_;  // this message's
};

}  // namespace

std::string InferenceService::ShmOwner(const grpc::CallbackServerContext& ctx) const {
  if (!tokens_required_) return "";
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  return it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* ctx,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  // Open like grpc.health.v1: a process that answers is live.
  response->set_live(true);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* ctx,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  // Open like grpc.health.v1, and false from the moment the drain starts
  // (health then answers NOT_SERVING; new calls get UNAVAILABLE).
  response->set_ready(!pipeline_->draining());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    absl::StatusOr<const OpDef*> def =
        FindModel(pipeline_->registry(), request->name(), request->version());
    if (!def.ok()) return def.status();
    response->set_ready(true);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return Answer(ctx, pipeline_, [&] {
    response->set_name("tensorops");
    response->set_version(TENSOROPS_VERSION);
    // Only what is implemented: ModelStatistics, and shared memory when on.
    response->add_extensions("statistics");
    if (shm_->enabled()) response->add_extensions("system_shared_memory");
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    absl::StatusOr<const OpDef*> def =
        FindModel(pipeline_->registry(), request->name(), request->version());
    if (!def.ok()) return def.status();
    DescribeModel(**def, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                       const ModelInferRequest* request,
                                                       ModelInferResponse* response) {
  return new ModelInferReactor(pipeline_, shm_, ShmOwner(*ctx), ctx, request, response);
}

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  return new ModelStreamInferReactor(pipeline_, shm_, ShmOwner(*ctx), ctx);
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    grpc::CallbackServerContext* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    std::vector<const OpDef*> defs;
    if (request->name().empty()) {
      for (const auto& d : pipeline_->registry().ops()) defs.push_back(d.get());
    } else {
      absl::StatusOr<const OpDef*> def =
          FindModel(pipeline_->registry(), request->name(), request->version());
      if (!def.ok()) return def.status();
      defs.push_back(*def);
    }
    const Metrics& metrics = *pipeline_->metrics();
    auto ns = [](double seconds) { return static_cast<uint64_t>(seconds * 1e9); };
    for (const OpDef* def : defs) {
      const Metrics::OpTotals t = metrics.ReadOpTotals(metrics.OpIndex(def->spec.name));
      inference::ModelStatistics* s = response->add_model_stats();
      s->set_name(def->spec.name);
      s->set_version(kModelVersion);
      s->set_last_inference(static_cast<uint64_t>(t.last_call_unix_seconds * 1e3));
      s->set_inference_count(t.success_count);
      s->set_execution_count(t.kernel_count);
      auto* stats = s->mutable_inference_stats();
      stats->mutable_success()->set_count(t.success_count);
      stats->mutable_success()->set_ns(ns(t.success_seconds));
      stats->mutable_fail()->set_count(t.fail_count);
      stats->mutable_fail()->set_ns(ns(t.fail_seconds));
      stats->mutable_queue()->set_count(t.queue_count);
      stats->mutable_queue()->set_ns(ns(t.queue_seconds));
      // Decoding and encoding are not timed apart from the call; the kernel is.
      stats->mutable_compute_infer()->set_count(t.kernel_count);
      stats->mutable_compute_infer()->set_ns(ns(t.kernel_seconds));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    grpc::CallbackServerContext* ctx, const inference::RepositoryIndexRequest*,
    inference::RepositoryIndexResponse* response) {
  return Answer(ctx, pipeline_, [&] {
    // Every op is always loaded, so `ready` filters nothing out.
    for (const auto& def : pipeline_->registry().ops()) {
      auto* m = response->add_models();
      m->set_name(def->spec.name);
      m->set_version(kModelVersion);
      m->set_state("READY");
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  return Answer(ctx, pipeline_, [&]() -> absl::Status {
    absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> regions =
        shm_->List(ShmOwner(*ctx), request->name());
    if (!regions.ok()) return regions.status();
    for (const auto& r : *regions) {
      auto& status = (*response->mutable_regions())[r->name()];
      status.set_name(r->name());
      status.set_key(r->key());
      status.set_offset(r->offset());
      status.set_byte_size(r->byte_size());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  return Answer(ctx, pipeline_, [&] {
    absl::Status s = shm_->Register(ShmOwner(*ctx), request->name(), request->key(),
                                    request->offset(), request->byte_size());
    pipeline_->metrics()->SetSharedMemoryRegions(shm_->size());
    return s;
  });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return Answer(ctx, pipeline_, [&] {
    absl::Status s = shm_->Unregister(ShmOwner(*ctx), request->name());
    pipeline_->metrics()->SetSharedMemoryRegions(shm_->size());
    return s;
  });
}

}  // namespace tensorops
