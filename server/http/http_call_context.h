// The HTTP door's CallContext (server/core/call_context.h): the request's
// Authorization header and trace context; no deadline (a queued call is
// dropped only past the request's `timeout` parameter) and never cancelled.
//
// Thread-safety: read by the call on any thread; immutable.
#ifndef TENSOROPS_SERVER_HTTP_HTTP_CALL_CONTEXT_H_
#define TENSOROPS_SERVER_HTTP_HTTP_CALL_CONTEXT_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/core/call.h"
#include "server/core/call_context.h"
#include "server/http/http_message.h"

namespace tensorops {

class HttpCallContext final : public CallContext {
 public:
  // `request` (for its trace context; null: none) must outlive this.
  explicit HttpCallContext(std::optional<std::string> authorization,
                           const HttpRequest* request = nullptr)
      : authorization_(std::move(authorization)), request_(request) {}
  std::optional<absl::string_view> authorization() const override;
  absl::Time deadline() const override { return absl::InfiniteFuture(); }
  bool cancelled() const override { return false; }
  TraceFields trace_fields() const override;

 private:
  const std::optional<std::string> authorization_;
  const HttpRequest* const request_;
};

// The bearer token, then the drain gate, for an answer outside a Call.
absl::Status Gate(CallPipeline& pipeline, const std::optional<std::string>& authorization);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_CALL_CONTEXT_H_
