// The one place where absl::Status and grpc::Status meet, for the server
// (handlers answer with grpc::Status) and the client SDK (which reports
// absl::Status). Both keep the code and the message; the code tables are
// checked per code by static_asserts in status.cc.
//
// Thread-safety: pure functions.
#ifndef TENSOROPS_WIRE_STATUS_H_
#define TENSOROPS_WIRE_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tensorops {

// Same code, same message. Messages are bounded where they are made. Codes
// outside gRPC's 0..16 become UNKNOWN.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Same code, same message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_STATUS_H_
