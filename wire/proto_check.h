// Why a request body is not a valid protobuf message, in words a caller can
// act on: protobuf's parsers only say "failed". A front door that parses a
// message itself (server/grpc/raw_unary.h: Execute and ModelInfer read gRPC's
// bytes in place) calls this on the error path only, so a garbage body gets
// INVALID_ARGUMENT naming the field and the byte where the wire format
// breaks instead of gRPC's empty INTERNAL.
//
// Thread-safety: a pure function of its arguments.
#ifndef TENSOROPS_WIRE_PROTO_CHECK_H_
#define TENSOROPS_WIRE_PROTO_CHECK_H_

#include <google/protobuf/descriptor.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensorops {

// Walks `bytes` as a message of type `type` (descending into fields of
// message type, checking proto3 strings for UTF-8) and returns
// INVALID_ARGUMENT for the first defect: "the request is not a valid
// <full name>: <field path> (field <n>) at byte <offset>: <reason>", with
// the field path (kernels/field_path.h) attached when there is one, e.g.
// "inputs[0].raw_data" (none for a defect in the top-level message).
// Returns OK when the walk finds nothing wrong (the bytes parse).
absl::Status ExplainParseFailure(const google::protobuf::Descriptor* type, absl::string_view bytes);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_PROTO_CHECK_H_
