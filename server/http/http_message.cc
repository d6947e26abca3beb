#include "server/http/http_message.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tensorops {

std::optional<absl::string_view> HttpRequest::FindHeader(absl::string_view name) const {
  for (const auto& [n, value] : headers) {
    if (absl::EqualsIgnoreCase(n, name)) return absl::string_view(value);
  }
  return std::nullopt;
}

uint64_t HttpBody::size() const {
  uint64_t n = text.size();
  for (absl::string_view p : parts) n += p.size();
  return n;
}

void AddRetryAfter(std::optional<absl::Duration> delay, HttpResponse* r) {
  if (!delay.has_value()) return;
  r->headers.emplace_back("Retry-After",
                          absl::StrCat(absl::ToInt64Seconds(absl::Ceil(*delay, absl::Seconds(1)))));
}

}  // namespace tensorops
