// The SDK channel's balancing options: see balancing.h.
#include "client/balancing.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

int ClampedMs(std::chrono::milliseconds ms) {
  return static_cast<int>(std::clamp<int64_t>(ms.count(), 1, INT32_MAX));
}

}  // namespace

absl::Status CheckBalancingOptions(const ClientOptions& options) {
  // The name goes into the service config's JSON as it is.
  for (const char c : options.health_check_service) {
    if (c == '"' || c == '\\' || absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          "ClientOptions.health_check_service: a gRPC service name holds no quote, backslash "
          "or control character");
    }
  }
  if (options.max_reconnect_backoff.count() <= 0) {
    return absl::InvalidArgumentError("ClientOptions.max_reconnect_backoff must be > 0");
  }
  if (options.min_time_between_resolutions.count() <= 0) {
    return absl::InvalidArgumentError("ClientOptions.min_time_between_resolutions must be > 0");
  }
  return absl::OkStatus();
}

void SetBalancingArgs(const ClientOptions& options, grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ClampedMs(options.max_reconnect_backoff));
  // The first attempt waits no longer than the cap either.
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
               std::min(1000, ClampedMs(options.max_reconnect_backoff)));
  args->SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS,
               ClampedMs(options.min_time_between_resolutions));
}

}  // namespace client_v1
}  // namespace tensorops
