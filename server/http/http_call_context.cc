#include "server/http/http_call_context.h"

namespace tensorops {

std::optional<absl::string_view> HttpCallContext::authorization() const {
  if (!authorization_.has_value()) return std::nullopt;
  return absl::string_view(*authorization_);
}

std::optional<absl::string_view> HttpCallContext::traceparent() const {
  if (request_ == nullptr) return std::nullopt;
  return request_->FindHeader("traceparent");
}

std::optional<absl::string_view> HttpCallContext::tracestate() const {
  if (request_ == nullptr) return std::nullopt;
  return request_->FindHeader("tracestate");
}

absl::Status Gate(CallPipeline& pipeline, const std::optional<std::string>& authorization) {
  return pipeline.Gate(HttpCallContext(authorization));
}

}  // namespace tensorops
