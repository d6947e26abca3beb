// The one place where absl::Status becomes grpc::Status.
#ifndef TENSOROPS_SERVER_STATUS_UTIL_H_
#define TENSOROPS_SERVER_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tensorops {

// Same code, same message. Messages are bounded where they are made.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_STATUS_UTIL_H_
