// Error details a program can read: googleapis' standard messages
// (google.rpc.RetryInfo, ErrorInfo, ...) carried on an absl::Status as
// payloads keyed by their type URL ("type.googleapis.com/google.rpc.RetryInfo"),
// the convention absl::Status payloads were made for. The server's rooms attach
// them where a refusal is decided (admission, drain); each door renders them
// at its edge: gRPC as a serialized google.rpc.Status in
// grpc-status-details-bin (wire/status.h), REST as a Retry-After header and
// the "details" of its JSON error (StatusDetailsJson). The SDK decodes them
// back into payloads.
//
// INVALID_ARGUMENT carries a google.rpc.BadRequest: one FieldViolation whose
// field is the request path the error was made with (kernels/field_path.h:
// InvalidArgumentAt where it is found, completed and mapped onto the
// request's own fields by the decoders on the way out) and whose
// description is the message itself (WithBadRequest, at each door's edge).
// Nothing reads a field out of a message.
//
// Example:
//   absl::Status s = absl::ResourceExhaustedError("in-flight byte budget exhausted ...");
//   s = WithRetryInfo(std::move(s), absl::Milliseconds(100));
//   s = WithErrorInfo(std::move(s), "INFLIGHT_BYTES_EXHAUSTED",
//                     {{"flag", "--max_inflight_bytes"}, {"limit", "214748364"}});
//   RetryDelay(s);  // 100 ms
//
// Thread-safety: pure functions.
#ifndef TENSOROPS_WIRE_STATUS_DETAILS_H_
#define TENSOROPS_WIRE_STATUS_DETAILS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tensorops {

// ErrorInfo.domain of every reason tensorops gives.
inline constexpr absl::string_view kErrorDomain = "tensorops";

// `status` with a google.rpc.RetryInfo: the caller may try again after
// `delay` (rounded to whole milliseconds, at least 0). OK stays OK.
absl::Status WithRetryInfo(absl::Status status, absl::Duration delay);

// `status` with a google.rpc.ErrorInfo of `reason` (UPPER_SNAKE_CASE) in
// kErrorDomain, and `metadata` (the flag and the figures, say). OK stays OK.
absl::Status WithErrorInfo(absl::Status status, absl::string_view reason,
                           const std::map<std::string, std::string>& metadata = {});

// The RetryInfo's delay, if `status` carries one that parses.
std::optional<absl::Duration> RetryDelay(const absl::Status& status);

// The ErrorInfo's reason, if `status` carries one that parses.
std::optional<std::string> ErrorReason(const absl::Status& status);

// `status` with a google.rpc.BadRequest of one FieldViolation {field,
// description}, each with non-ASCII bytes as '?' (proto3 strings must be
// UTF-8; a message may quote what a client sent). OK stays OK.
absl::Status WithFieldViolation(absl::Status status, absl::string_view field,
                                absl::string_view description);

// One google.rpc.BadRequest.FieldViolation as read back.
struct FieldViolation {
  std::string field;
  std::string description;
};
// The BadRequest's violations, empty if `status` carries none that parses.
std::vector<FieldViolation> FieldViolations(const absl::Status& status);

// An INVALID_ARGUMENT without a BadRequest gets one: its field path
// (kernels/field_path.h ErrorFieldPath; "" when it was made with none: the
// request as a whole, say malformed JSON) and its message. Any other status
// is returned as it is.
absl::Status WithBadRequest(absl::Status status);

// The google.rpc details of `status` in proto3's JSON form, as Google's
// HTTP APIs give google.rpc.Status.details: a JSON array of objects with an
// "@type" ([{"@type": "type.googleapis.com/google.rpc.BadRequest",
// "fieldViolations": [{"field": ..., "description": ...}]}]); "" when it
// carries none.
std::string StatusDetailsJson(const absl::Status& status);

// A serialized google.rpc.Status of `status`'s code and message with each
// google.rpc payload as a detail (an Any of the same type URL and bytes);
// empty when `status` is OK or carries no such payload.
std::string EncodeStatusDetails(const absl::Status& status);

// `status` with the details of a serialized google.rpc.Status added as
// payloads. Bytes that do not parse, or a google.rpc.Status whose code is
// not `status`'s, add nothing (a detail belongs to its status).
absl::Status DecodeStatusDetails(absl::Status status, absl::string_view bin);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_STATUS_DETAILS_H_
