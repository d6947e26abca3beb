// The one place where absl::Status and grpc::Status meet, for the server
// (handlers answer with grpc::Status) and the client SDK (which reports
// absl::Status). Both keep the code, the message and the google.rpc details
// (wire/status_details.h: grpc-status-details-bin); the code tables are
// checked per code by static_asserts in status.cc.
//
// Thread-safety: pure functions.
#ifndef TENSOROPS_WIRE_STATUS_H_
#define TENSOROPS_WIRE_STATUS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tensorops {

// Same code, same message, and the google.rpc payloads as a serialized
// google.rpc.Status (grpc-status-details-bin). Messages are bounded where
// they are made. Codes outside gRPC's 0..16 become UNKNOWN.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The same, for an RPC of `ctx`, which also gets gRPC's retry pushback
// trailer (grpc-retry-pushback-ms): a RetryInfo's delay, so a client's
// gRPC retry policy waits that long before its next attempt; -1 (do not
// retry) for a RESOURCE_EXHAUSTED without one, which no retry can cure (a
// tensor over a limit). Call it before the RPC's Finish.
grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* ctx);

// Same code, same message, and the details of grpc-status-details-bin as
// payloads.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_STATUS_H_
