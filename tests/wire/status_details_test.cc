#include "wire/status_details.h"

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace tensorops
