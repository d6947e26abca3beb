#include "wire/status_details.h"

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "kernels/field_path.h"
#include "wire/status.h"

namespace tensorops {
namespace {

absl::Status Refused() {
  absl::Status s = absl::ResourceExhaustedError("in-flight byte budget exhausted; retry later");
  s = WithRetryInfo(std::move(s), absl::Milliseconds(1250));
  return WithErrorInfo(std::move(s), "INFLIGHT_BYTES_EXHAUSTED",
                       {{"flag", "--max_inflight_bytes"}, {"limit", "1000"}});
}

TEST(StatusDetailsTest, AttachedDetailsReadBack) {
  const absl::Status s = Refused();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryDelay(s), absl::Milliseconds(1250));
  EXPECT_EQ(ErrorReason(s), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_EQ(RetryDelay(absl::InternalError("x")), std::nullopt);
  EXPECT_EQ(ErrorReason(absl::InternalError("x")), std::nullopt);
  // OK stays OK: a status without an error carries nothing.
  EXPECT_TRUE(WithRetryInfo(absl::OkStatus(), absl::Seconds(1)).ok());
  EXPECT_EQ(RetryDelay(WithRetryInfo(absl::OkStatus(), absl::Seconds(1))), std::nullopt);
  // Negative delays are 0, sub-millisecond parts dropped.
  EXPECT_EQ(RetryDelay(WithRetryInfo(absl::UnavailableError("x"), absl::Milliseconds(-5))),
            absl::ZeroDuration());
}

TEST(StatusDetailsTest, EncodedAsGoogleRpcStatus) {
  absl::Status s = Refused();
  s.SetPayload("example.com/not-google-rpc", absl::Cord("kept off the wire"));
  google::rpc::Status wire;
  ASSERT_TRUE(wire.ParseFromString(EncodeStatusDetails(s)));
  EXPECT_EQ(wire.code(), 8);
  EXPECT_EQ(wire.message(), s.message());
  ASSERT_EQ(wire.details_size(), 2);
  google::rpc::RetryInfo retry;
  google::rpc::ErrorInfo info;
  for (const auto& any : wire.details()) {
    if (any.type_url() == "type.googleapis.com/google.rpc.RetryInfo") {
      ASSERT_TRUE(retry.ParseFromString(any.value()));
    } else {
      ASSERT_EQ(any.type_url(), "type.googleapis.com/google.rpc.ErrorInfo");
      ASSERT_TRUE(info.ParseFromString(any.value()));
    }
  }
  EXPECT_EQ(retry.retry_delay().seconds(), 1);
  EXPECT_EQ(retry.retry_delay().nanos(), 250000000);
  EXPECT_EQ(info.reason(), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_EQ(info.domain(), "tensorops");
  EXPECT_EQ(info.metadata().at("flag"), "--max_inflight_bytes");
  // Nothing to say: no bytes at all (no empty google.rpc.Status on the wire).
  EXPECT_EQ(EncodeStatusDetails(absl::InvalidArgumentError("bad")), "");
  EXPECT_EQ(EncodeStatusDetails(absl::OkStatus()), "");
}

TEST(StatusDetailsTest, ThroughGrpcStatusAndBack) {
  const absl::Status s = Refused();
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.error_message(), s.message());
  EXPECT_FALSE(g.error_details().empty());
  const absl::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), s.code());
  EXPECT_EQ(back.message(), s.message());
  EXPECT_EQ(RetryDelay(back), absl::Milliseconds(1250));
  EXPECT_EQ(ErrorReason(back), "INFLIGHT_BYTES_EXHAUSTED");
}

TEST(StatusDetailsTest, DetailsOfAnotherStatusOrGarbageAreIgnored) {
  const std::string bin = EncodeStatusDetails(Refused());
  // A google.rpc.Status whose code is not the status's own.
  EXPECT_EQ(RetryDelay(DecodeStatusDetails(absl::UnavailableError("x"), bin)), std::nullopt);
  const absl::Status garbage = DecodeStatusDetails(absl::ResourceExhaustedError("x"), "\xff\xff");
  EXPECT_EQ(garbage, absl::ResourceExhaustedError("x"));
  EXPECT_EQ(DecodeStatusDetails(absl::OkStatus(), bin), absl::OkStatus());
}

TEST(StatusDetailsTest, InvalidArgumentGetsBadRequestWithItsPathAndMessage) {
  // The field is the path the error was made with (kernels/field_path.h),
  // whatever the message says: a message naming another path changes nothing.
  const absl::Status s = WithBadRequest(
      InvalidArgumentAt("inputs[2].int64_data[0]", "Roll: axes[0] = 5 is out of range"));
  const std::vector<FieldViolation> v = FieldViolations(s);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].field, "inputs[2].int64_data[0]");
  EXPECT_EQ(v[0].description, s.message());
  // Made without a path (the request as a whole): a BadRequest without a field.
  const absl::Status whole = WithBadRequest(absl::InvalidArgumentError("inputs[1].shape bad"));
  ASSERT_EQ(FieldViolations(whole).size(), 1u);
  EXPECT_EQ(FieldViolations(whole)[0].field, "");
  // One already attached is kept as it is.
  const absl::Status own = WithBadRequest(
      WithFieldViolation(absl::InvalidArgumentError("x"), "attrs.mode", "its own words"));
  ASSERT_EQ(FieldViolations(own).size(), 1u);
  EXPECT_EQ(FieldViolations(own)[0].description, "its own words");
  // Other codes get none.
  EXPECT_TRUE(FieldViolations(WithBadRequest(absl::NotFoundError("inputs[0]"))).empty());
  // Non-ASCII bytes a client sent become '?' (proto3 strings are UTF-8).
  const absl::Status quoted = WithBadRequest(InvalidArgumentAt("op", "unknown op '\xff\xfe'"));
  EXPECT_EQ(FieldViolations(quoted)[0].description, "unknown op '\?\?'");
}

TEST(StatusDetailsTest, BadRequestOnTheGrpcWire) {
  const grpc::Status g =
      ToGrpcStatus(InvalidArgumentAt("inputs[0].shape[1]", "inputs[0].shape[1] = -3 is negative"));
  google::rpc::Status wire;
  ASSERT_TRUE(wire.ParseFromString(g.error_details()));
  EXPECT_EQ(wire.code(), 3);
  ASSERT_EQ(wire.details_size(), 1);
  EXPECT_EQ(wire.details(0).type_url(), "type.googleapis.com/google.rpc.BadRequest");
  google::rpc::BadRequest bad;
  ASSERT_TRUE(wire.details(0).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 1);
  EXPECT_EQ(bad.field_violations(0).field(), "inputs[0].shape[1]");
  EXPECT_EQ(bad.field_violations(0).description(), g.error_message());
  // And back through the SDK's side.
  EXPECT_EQ(FieldViolations(FromGrpcStatus(g)).size(), 1u);
}

TEST(StatusDetailsTest, DetailsAsProto3Json) {
  EXPECT_EQ(StatusDetailsJson(absl::InvalidArgumentError("x")), "");
  EXPECT_EQ(
      StatusDetailsJson(WithBadRequest(InvalidArgumentAt("attrs.mode", "attribute 'mode' bad"))),
      "[{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":"
      "[{\"field\":\"attrs.mode\",\"description\":\"attribute 'mode' bad\"}]}]");
  const std::string refused = StatusDetailsJson(Refused());
  EXPECT_THAT(refused, ::testing::HasSubstr("\"retryDelay\":\"1.250s\""));
  EXPECT_THAT(refused, ::testing::HasSubstr("\"reason\":\"INFLIGHT_BYTES_EXHAUSTED\""));
}

}  // namespace
}  // namespace tensorops
