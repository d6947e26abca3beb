// The SDK's retries against a stand-in server that answers every call the
// same way (a gRPC generic service: no tensorops code on the server side),
// counting the attempts that reach it:
//   - UNKNOWN (an answer a proxy cut: issue 36) is resent by the SDK itself,
//     max_attempts in all, with the policy's backoff; not with retries off;
//   - UNAVAILABLE is retried by gRPC up to max_buffered_bytes and by the SDK
//     above it: max_attempts either way;
//   - RESOURCE_EXHAUSTED is retried by gRPC, unless the server's pushback
//     (grpc-retry-pushback-ms: -1) says no retry can help.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"

namespace tensorops {
namespace {

using Clock = std::chrono::steady_clock;

class AlwaysRefuses final : public grpc::CallbackGenericService {
 public:
  AlwaysRefuses(grpc::StatusCode code, std::string pushback)
      : code_(code), pushback_(std::move(pushback)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() == "/tensorops.v1.TensorOps/Execute") ++calls_;
    if (!pushback_.empty()) ctx->AddTrailingMetadata("grpc-retry-pushback-ms", pushback_);
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(grpc::StatusCode code) { Finish(grpc::Status(code, "refused by the test")); }
      void OnDone() override { delete this; }
    };
    return new Reactor(code_);
  }
  int calls() const { return calls_.load(); }

 private:
  const grpc::StatusCode code_;
  const std::string pushback_;
  std::atomic<int> calls_{0};
};

class RetryTest : public ::testing::Test {
 protected:
  void Serve(grpc::StatusCode code, std::string pushback = "") {
    service_ = std::make_unique<AlwaysRefuses>(code, std::move(pushback));
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // One Roll of `bytes` bytes through a new client; returns its status and
  // sets *ms to how long it took.
  absl::Status Roll(const RetryPolicy& retry, int64_t bytes, double* ms) {
    ClientOptions options;
    options.target = absl::StrCat("127.0.0.1:", port_);
    options.retry = retry;
    auto client = Client::Create(options);
    if (!client.ok()) return client.status();
    const auto t0 = Clock::now();
    auto out = (*client)->Roll(Tensor(std::vector<int32_t>(bytes / 4, 1), {bytes / 4}),
                               Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0));
    *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return out.status();
  }

  std::unique_ptr<AlwaysRefuses> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
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
