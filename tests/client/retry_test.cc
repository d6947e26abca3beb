// The SDK's retries against a stand-in server that answers every call the
// same way (a gRPC generic service: no tensorops code on the server side),
// counting the attempts that reach it:
//   - UNKNOWN (an answer a proxy cut: issue 36) is resent by the SDK itself,
//     max_attempts in all, with the policy's backoff; not with retries off;
//   - UNAVAILABLE is retried by gRPC up to max_buffered_bytes and by the SDK
//     above it: max_attempts either way;
//   - RESOURCE_EXHAUSTED is retried by gRPC, unless the server's pushback
//     (grpc-retry-pushback-ms: -1) says no retry can help.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/client/stand_in_server.h"

namespace tensorops {
namespace {

using Clock = std::chrono::steady_clock;

class RetryTest : public ::testing::Test {
 protected:
  void Serve(grpc::StatusCode code, std::string pushback = "") {
    service_ = std::make_unique<testing::StandInServer>(code, std::move(pushback));
    ASSERT_TRUE(service_->Start());
  }

  // One Roll of `bytes` bytes through a new client, by the sync call or
  // (`async`) ExecuteFuture; returns its status and sets *ms to how long it
  // took.
  absl::Status Roll(const RetryPolicy& retry, int64_t bytes, double* ms, bool async = false) {
    ClientOptions options;
    options.target = service_->address();
    options.retry = retry;
    auto client = Client::Create(options);
    if (!client.ok()) return client.status();
    const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>(bytes / 4, 1), {bytes / 4}),
                                        Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
    const auto t0 = Clock::now();
    const absl::Status st = async ? (*client)->ExecuteFuture("Roll", {}, inputs).get().status()
                                  : (*client)->Execute("Roll", {}, inputs).status();
    *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return st;
  }

  std::unique_ptr<testing::StandInServer> service_;
};

TEST_F(RetryTest, CutAnswersAreResentWithTheBackoff) {
  Serve(grpc::StatusCode::UNKNOWN);
  RetryPolicy retry;  // 5 attempts, 50 ms doubling
  double ms = 0;
  const absl::Status st = Roll(retry, 1024, &ms);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnknown) << st;
  EXPECT_EQ(service_->calls(), retry.max_attempts);
  EXPECT_GE(ms, (50 + 100 + 200 + 400) * 0.9);
}

TEST_F(RetryTest, CutAnswersAreNotResentWithRetriesOff) {
  Serve(grpc::StatusCode::UNKNOWN);
  RetryPolicy off;
  off.enabled = false;
  double ms = 0;
  EXPECT_EQ(Roll(off, 1024, &ms).code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(service_->calls(), 1);
}

// ExecuteAsync / ExecuteFuture resend as the sync call does (issue 45): the
// same attempts and backoff (waited on a gRPC alarm, no thread blocked), and
// nothing with retries off.
TEST_F(RetryTest, AsyncCallsResendCutAnswersAsTheSyncOneDoes) {
  Serve(grpc::StatusCode::UNKNOWN);
  RetryPolicy retry;  // 5 attempts, 50 ms doubling
  double ms = 0;
  const absl::Status st = Roll(retry, 1024, &ms, /*async=*/true);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnknown) << st;
  EXPECT_EQ(service_->calls(), retry.max_attempts);
  EXPECT_GE(ms, (50 + 100 + 200 + 400) * 0.9);
  RetryPolicy off;
  off.enabled = false;
  EXPECT_EQ(Roll(off, 1024, &ms, /*async=*/true).code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(service_->calls(), retry.max_attempts + 1);
  // Over gRPC's retry buffer, UNAVAILABLE is the SDK's to resend, async too.
  RetryPolicy small_buffer;
  small_buffer.max_buffered_bytes = 2048;
  Serve(grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Roll(small_buffer, 8192, &ms, /*async=*/true).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_->calls(), small_buffer.max_attempts);
}

// The resends end at the call's deadline, async as sync.
TEST_F(RetryTest, AsyncResendsStopAtTheDeadline) {
  Serve(grpc::StatusCode::UNKNOWN);
  RetryPolicy slow;
  slow.initial_backoff = std::chrono::milliseconds(1500);
  slow.max_backoff = std::chrono::milliseconds(1500);
  ClientOptions options;
  options.target = service_->address();
  options.retry = slow;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  CallOptions call;
  call.deadline = std::chrono::milliseconds(2500);  // room for one backoff, not two
  const absl::Status st =
      (*client)
          ->ExecuteFuture("Roll", {},
                          {Tensor(std::vector<int32_t>{1, 2}, {2}), Tensor::Scalar<int64_t>(1),
                           Tensor::Scalar<int64_t>(0)},
                          call)
          .get()
          .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnknown) << st;
  EXPECT_EQ(service_->calls(), 2);
}

// gRPC retries UNAVAILABLE only for calls its buffer holds; the SDK resends
// bigger ones itself, so each size gets the policy's attempts, not more.
TEST_F(RetryTest, UnavailableIsRetriedOnceWhateverTheSize) {
  Serve(grpc::StatusCode::UNAVAILABLE);
  RetryPolicy small_buffer;
  small_buffer.max_buffered_bytes = 2048;
  double ms = 0;
  EXPECT_EQ(Roll(small_buffer, 1024, &ms).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_->calls(), small_buffer.max_attempts);  // by gRPC
  EXPECT_EQ(Roll(small_buffer, 8192, &ms).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_->calls(), 2 * small_buffer.max_attempts);  // by the SDK
  RetryPolicy off;
  off.enabled = false;
  EXPECT_EQ(Roll(off, 8192, &ms).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_->calls(), 2 * small_buffer.max_attempts + 1);
}

TEST_F(RetryTest, ResourceExhaustedIsRetriedUnlessThePushbackSaysNo) {
  Serve(grpc::StatusCode::RESOURCE_EXHAUSTED);
  double ms = 0;
  EXPECT_EQ(Roll(RetryPolicy{}, 1024, &ms).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(service_->calls(), RetryPolicy{}.max_attempts);
}

TEST_F(RetryTest, PushbackMinusOneStopsRetries) {
  Serve(grpc::StatusCode::RESOURCE_EXHAUSTED, "-1");
  double ms = 0;
  EXPECT_EQ(Roll(RetryPolicy{}, 1024, &ms).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(service_->calls(), 1);
}

}  // namespace
}  // namespace tensorops
