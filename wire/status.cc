#include "wire/status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

// absl and gRPC share the canonical code numbering; prove it per code so the
// cast below stays correct (as tensorstore's internal/grpc/utils.cc does).
#define TENSOROPS_ASSERT_SAME_CODE(name)                                        \
  static_assert(static_cast<int>(absl::StatusCode::k##name) ==                  \
                    static_cast<int>(grpc::StatusCode::TENSOROPS_UPPER_##name), \
                #name)
#define TENSOROPS_UPPER_Ok OK
#define TENSOROPS_UPPER_Cancelled CANCELLED
#define TENSOROPS_UPPER_Unknown UNKNOWN
#define TENSOROPS_UPPER_InvalidArgument INVALID_ARGUMENT
#define TENSOROPS_UPPER_DeadlineExceeded DEADLINE_EXCEEDED
#define TENSOROPS_UPPER_NotFound NOT_FOUND
#define TENSOROPS_UPPER_AlreadyExists ALREADY_EXISTS
#define TENSOROPS_UPPER_PermissionDenied PERMISSION_DENIED
#define TENSOROPS_UPPER_ResourceExhausted RESOURCE_EXHAUSTED
#define TENSOROPS_UPPER_FailedPrecondition FAILED_PRECONDITION
#define TENSOROPS_UPPER_Aborted ABORTED
#define TENSOROPS_UPPER_OutOfRange OUT_OF_RANGE
#define TENSOROPS_UPPER_Unimplemented UNIMPLEMENTED
#define TENSOROPS_UPPER_Internal INTERNAL
#define TENSOROPS_UPPER_Unavailable UNAVAILABLE
#define TENSOROPS_UPPER_DataLoss DATA_LOSS
#define TENSOROPS_UPPER_Unauthenticated UNAUTHENTICATED
TENSOROPS_ASSERT_SAME_CODE(Ok);
TENSOROPS_ASSERT_SAME_CODE(Cancelled);
TENSOROPS_ASSERT_SAME_CODE(Unknown);
TENSOROPS_ASSERT_SAME_CODE(InvalidArgument);
TENSOROPS_ASSERT_SAME_CODE(DeadlineExceeded);
TENSOROPS_ASSERT_SAME_CODE(NotFound);
TENSOROPS_ASSERT_SAME_CODE(AlreadyExists);
TENSOROPS_ASSERT_SAME_CODE(PermissionDenied);
TENSOROPS_ASSERT_SAME_CODE(ResourceExhausted);
TENSOROPS_ASSERT_SAME_CODE(FailedPrecondition);
TENSOROPS_ASSERT_SAME_CODE(Aborted);
TENSOROPS_ASSERT_SAME_CODE(OutOfRange);
TENSOROPS_ASSERT_SAME_CODE(Unimplemented);
TENSOROPS_ASSERT_SAME_CODE(Internal);
TENSOROPS_ASSERT_SAME_CODE(Unavailable);
TENSOROPS_ASSERT_SAME_CODE(DataLoss);
TENSOROPS_ASSERT_SAME_CODE(Unauthenticated);

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  // Codes outside the canonical 0..16 (absl allows any int) become UNKNOWN.
  if (code < 0 || code > static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, std::string(status.message()));
  }
  // INVALID_ARGUMENT gets its google.rpc.BadRequest here, at the edge.
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()),
                      EncodeStatusDetails(WithBadRequest(status)));
}

grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* ctx) {
  if (const std::optional<absl::Duration> delay = RetryDelay(status); delay.has_value()) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms",
                             absl::StrCat(absl::ToInt64Milliseconds(*delay)));
  } else if (status.code() == absl::StatusCode::kResourceExhausted) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "-1");
  }
  return ToGrpcStatus(status);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return DecodeStatusDetails(
      absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()),
      status.error_details());
}

}  // namespace tensorops
