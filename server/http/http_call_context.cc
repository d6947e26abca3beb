#include "server/http/http_call_context.h"

#include "absl/strings/match.h"

namespace tensorops {

std::optional<absl::string_view> HttpCallContext::authorization() const {
  if (!authorization_.has_value()) return std::nullopt;
  return absl::string_view(*authorization_);
}

TraceFields HttpCallContext::trace_fields() const {
  TraceFields fields;
  if (request_ == nullptr) return fields;
  for (const auto& [name, value] : request_->headers) {
    if (absl::EqualsIgnoreCase(name, "traceparent")) {
      fields.traceparent.emplace_back(value);
    } else if (absl::EqualsIgnoreCase(name, "tracestate")) {
      fields.tracestate.emplace_back(value);
    }
  }
  return fields;
}

absl::Status Gate(CallPipeline& pipeline, const std::optional<std::string>& authorization) {
  return pipeline.Gate(HttpCallContext(authorization));
}

}  // namespace tensorops
