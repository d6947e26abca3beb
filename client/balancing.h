// How the SDK's channel spreads calls over the replicas its target resolves
// to (ClientOptions::load_balancing_policy, health_check_service,
// max_reconnect_backoff, min_time_between_resolutions): the checks of those
// options and the channel arguments they become. The policy and the health
// check themselves are part of the service config (ServiceConfigJson,
// retry.h). Private to the SDK (not under include/).
//
// Thread-safety: stateless; safe from any thread.
#ifndef TENSOROPS_CLIENT_BALANCING_H_
#define TENSOROPS_CLIENT_BALANCING_H_

#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {

// InvalidArgument naming the field if a balancing option cannot be used
// (a name that would break the service config's JSON, a backoff <= 0).
absl::Status CheckBalancingOptions(const ClientOptions& options);

// Sets the reconnect backoff cap and the re-resolution interval on `args`.
void SetBalancingArgs(const ClientOptions& options, grpc::ChannelArguments* args);

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_BALANCING_H_
