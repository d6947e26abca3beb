// The gRPC door's CallContext (server/core/call_context.h): what a Call
// needs of its RPC, read from the grpc::CallbackServerContext; and what a
// Call sends back in metadata (its traceparent, its server-timing).
//
// Thread-safety: as CallContext; gRPC's ServerContext accessors used here
// are safe while the RPC lives.
#ifndef TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_
#define TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_

#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/core/call.h"
#include "server/core/call_context.h"

namespace tensorops {

class GrpcCallContext final : public CallContext {
 public:
  // `ctx` must outlive this.
  explicit GrpcCallContext(const grpc::CallbackServerContext* ctx) : ctx_(ctx) {}

  // The "authorization" metadata (gRPC's memory, valid while the RPC lives).
  std::optional<absl::string_view> authorization() const override {
    const auto& metadata = ctx_->client_metadata();
    auto it = metadata.find("authorization");
    if (it == metadata.end()) return std::nullopt;
    return absl::string_view(it->second.data(), it->second.size());
  }
  absl::string_view authorization_carrier() const override { return "metadata"; }
  absl::Time deadline() const override { return absl::FromChrono(ctx_->deadline()); }
  bool cancelled() const override { return ctx_->IsCancelled(); }
  bool retried() const override {
    return ctx_->client_metadata().count("grpc-previous-rpc-attempts") > 0;
  }
  TraceFields trace_fields() const override {
    TraceFields fields;
    FindAll("traceparent", &fields.traceparent);
    FindAll("tracestate", &fields.tracestate);
    return fields;
  }

 private:
  // Every value of a metadata key, in order (gRPC's memory, valid while the
  // RPC lives).
  template <typename Out>
  void FindAll(const char* key, Out* out) const {
    const auto range = ctx_->client_metadata().equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      out->emplace_back(it->second.data(), it->second.size());
    }
  }

  const grpc::CallbackServerContext* const ctx_;
};

// The call's own traceparent, when the pipeline sends it (--trace_headers):
// in the initial metadata of a call that answers (`answered`: a unary call
// that ends OK, a stream about to send its output header), else in the
// trailing metadata. A failure must stay a Trailers-Only response: a
// response with headers commits the call in gRPC's client retry (the
// retryPolicy, the pushback of a refusal), which then never retries it.
// Before the initial metadata leaves (a unary Finish, a stream's first
// write), or for trailing metadata before the Finish.
inline void AddTraceparent(const Call& call, grpc::ServerContextBase* ctx, bool answered) {
  if (!call.trace_headers()) return;
  std::string value(call.trace().traceparent());
  if (answered) {
    ctx->AddInitialMetadata("traceparent", std::move(value));
  } else {
    ctx->AddTrailingMetadata("traceparent", std::move(value));
  }
}

// The call's stages, "server-timing" in the RPC's trailing metadata (the
// text of HTTP's Server-Timing), when the pipeline sends it. From the
// Call's FinishRpc, before the RPC's Finish.
inline void AddServerTiming(const Call& call, grpc::ServerContextBase* ctx) {
  if (!call.trace_headers()) return;
  ctx->AddTrailingMetadata("server-timing", RenderServerTiming(call.server_timing()));
}

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_
