// Retries and resends of the SDK's calls (RetryPolicy in tensorops/client.h):
// gRPC's own retries, set up as the channel's service config
// (ServiceConfigJson), and the resends gRPC cannot make, which the SDK makes
// itself (Client::Impl::ResendCutAnswer, defined in retry.cc). Private to the
// SDK (not under include/).
//
// Thread-safety: stateless; safe from any thread.
#ifndef TENSOROPS_CLIENT_RETRY_H_
#define TENSOROPS_CLIENT_RETRY_H_

#include <string>

#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {

// The channel's gRPC service config: its load-balancing policy, its
// client-side health check (healthCheckConfig) and, when
// options.retry.enabled, the retry policy of each method.
std::string ServiceConfigJson(const ClientOptions& options);

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_RETRY_H_
