// The gRPC door's CallContext (server/core/call_context.h): what a Call
// needs of its RPC, read from the grpc::CallbackServerContext.
//
// Thread-safety: as CallContext; gRPC's ServerContext accessors used here
// are safe while the RPC lives.
#ifndef TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_
#define TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_

#include <grpcpp/server_context.h>

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
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

 private:
  const grpc::CallbackServerContext* const ctx_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_GRPC_CALL_CONTEXT_H_
