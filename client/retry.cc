// Retries and resends of the SDK's calls: see retry.h.
#include "client/retry.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/client_impl.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  return absl::StrFormat("%.3fs", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

std::string ServiceConfigJson(const ClientOptions& options) {
  std::string json = "{";
  if (!options.load_balancing_policy.empty()) {
    absl::StrAppend(&json, "\"loadBalancingConfig\":[{\"", options.load_balancing_policy,
                    "\":{}}]");
  }
  if (!options.health_check_service.empty()) {
    if (json.size() > 1) json += ",";
    absl::StrAppend(&json, "\"healthCheckConfig\":{\"serviceName\":\"",
                    options.health_check_service, "\"}");
  }
  if (options.retry.enabled) {
    if (json.size() > 1) json += ",";
    const RetryPolicy& r = options.retry;
    const auto policy = [&r](absl::string_view codes) {
      return absl::StrCat("\"retryPolicy\":{\"maxAttempts\":", r.max_attempts,
                          ",\"initialBackoff\":\"", Seconds(r.initial_backoff),
                          "\",\"maxBackoff\":\"", Seconds(r.max_backoff),
                          "\",\"backoffMultiplier\":", absl::StrFormat("%g", r.backoff_multiplier),
                          ",\"retryableStatusCodes\":[", codes, "]}");
    };
    // RESOURCE_EXHAUSTED (the server's refusals with RetryInfo) is retried for
    // the unary Execute only: retrying it on a bidi stream that gRPC's memory
    // quota reset (RST_STREAM 11) while the SDK's threads read and write it
    // crashed gRPC 1.51's retry filter (memory_limit_e2e_test under gdb).
    absl::StrAppend(&json,
                    "\"methodConfig\":[{\"name\":[{\"service\":\"tensorops.v1.TensorOps\","
                    "\"method\":\"Execute\"}],",
                    policy("\"UNAVAILABLE\",\"RESOURCE_EXHAUSTED\""),
                    "},{\"name\":[{\"service\":\"tensorops.v1.TensorOps\"},"
                    "{\"service\":\"grpc.health.v1.Health\"}],",
                    policy("\"UNAVAILABLE\""), "}]");
  }
  json += "}";
  return json;
}

bool Client::Impl::NeverSent(const absl::Status& st) {
  return st.code() == absl::StatusCode::kUnavailable &&
         absl::StrContains(st.message(), "health check call failed");
}

bool Client::Impl::ResendCutAnswer(const absl::Status& st, int attempt, size_t request_bytes,
                                   std::chrono::system_clock::time_point deadline) const {
  const std::optional<std::chrono::milliseconds> wait =
      ResendWait(st, attempt, request_bytes, deadline);
  if (!wait.has_value()) return false;
  std::this_thread::sleep_for(*wait);
  return true;
}

std::optional<std::chrono::milliseconds> Client::Impl::ResendWait(
    const absl::Status& st, int attempt, size_t request_bytes,
    std::chrono::system_clock::time_point deadline) const {
  // What gRPC's retries (the policy above) cannot resend, and this SDK can
  // (it holds the request anyway; every op is a pure function of it):
  //  - an answer cut after its first byte, where gRPC's retries stop: a
  //    replica that died while it sent the answer comes back from a proxy
  //    as UNKNOWN "Stream removed" (HAProxy 2.6 resets the stream after the
  //    response headers: issue 36). Our servers never answer UNKNOWN;
  //  - an UNAVAILABLE call over max_buffered_bytes, which gRPC commits to
  //    its first attempt: e.g. a connection the server closed after its
  //    max-age GOAWAY while the call was on its way (gRPC 1.51 then resets
  //    the socket, and the client never reads the GOAWAY that would have
  //    told it the call was not processed);
  //  - an UNAVAILABLE of any size whose connection broke under it ("Connection
  //    reset by peer", "Socket closed") once gRPC had committed the call to
  //    its attempt (the answer had begun): straight to a replica (no proxy to
  //    turn it into UNKNOWN), a replica's connection that ends under a call
  //    (its age, its drain) looks like this (issue 48: 1 of 19,764 calls of
  //    a rolling restart, a 3 MiB one);
  //  - an UNAVAILABLE no server saw because the only replica's health watch
  //    had just failed ("health check call failed": gRPC's memory quota on a
  //    server under a burst resets streams, the watch among them, and the
  //    channel counts the replica down until a new watch answers;
  //    memory_limit_e2e_test's call after the burst). Waited for as long as
  //    the policy's longest backoff, the time gRPC's health client may take.
  // Within the policy's attempts and the call's deadline.
  const RetryPolicy& r = options.retry;
  const bool cut = st.code() == absl::StatusCode::kUnknown;
  const bool unavailable = st.code() == absl::StatusCode::kUnavailable;
  const bool unbuffered = unavailable && static_cast<int64_t>(request_bytes) > r.max_buffered_bytes;
  const bool broken = unavailable && (absl::StrContains(st.message(), "Connection reset") ||
                                      absl::StrContains(st.message(), "Socket closed"));
  const bool unwatched = NeverSent(st);
  if (!(cut || unbuffered || broken || unwatched) || !r.enabled || attempt >= r.max_attempts) {
    return std::nullopt;
  }
  const auto backoff = r.initial_backoff * std::pow(r.backoff_multiplier, attempt - 1);
  const auto wait = unwatched ? r.max_backoff
                              : std::min<std::chrono::milliseconds>(
                                    r.max_backoff,
                                    std::chrono::duration_cast<std::chrono::milliseconds>(backoff));
  if (std::chrono::system_clock::now() + wait >= deadline) return std::nullopt;
  return wait;
}

}  // namespace client_v1
}  // namespace tensorops
