// The call lifecycle (server/core/call.h), in-process: no RPC, a fake
// CallContext (no deadline, never cancelled unless a test says so) and a
// finish hook that records what the RPC would have been finished with.
#include "server/core/call.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/http_get.h"

namespace tensorops {
namespace {

using Queue = AdmissionController::Queue;

// absl::Notification, but seen by ThreadSanitizer (Debian's Abseil is not
// built with it, so its Mutex's ordering is invisible: false reports).
class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

// A door's view of its RPC, set by the test.
class FakeCallContext final : public CallContext {
 public:
  std::optional<absl::string_view> authorization() const override { return authorization_; }
  absl::string_view authorization_carrier() const override { return carrier_; }
  absl::Time deadline() const override { return deadline_; }
  bool cancelled() const override { return cancelled_; }
  bool retried() const override { return retried_; }

  std::optional<absl::string_view> authorization_;
  absl::string_view carrier_;
  absl::Time deadline_ = absl::InfiniteFuture();
  bool cancelled_ = false;
  bool retried_ = false;
};

class CallTest : public ::testing::Test {
 protected:
  void SetUpPipeline(int64_t max_queue, CallPipeline::Options options = {}) {
    RegisterBuiltinOps(&registry_);
    std::vector<std::string> names;
    for (const auto& def : registry_.ops()) names.push_back(def->spec.name);
    metrics_ = std::make_unique<Metrics>(names);
    Metrics* metrics = metrics_.get();
    // Methods as doors register them (core/ names none of its own).
    CallMethodSpec spec;
    spec.name = "Execute";
    execute_ = metrics->AddMethod(spec);
    spec.name = "REST";
    rest_ = metrics->AddMethod(spec);
    spec.name = "ExecuteStream";
    spec.bytes = CallBytes::kStreamBytes;
    execute_stream_ = metrics->AddMethod(spec);
    admission_ = std::make_unique<AdmissionController>(
        max_queue, 1 << 20,
        [metrics](int64_t i, int64_t b, int64_t q) { metrics->SetAdmission(i, b, q); });
    pool_ = std::make_unique<ThreadPool>(2);
    pipeline_ =
        std::make_unique<CallPipeline>(&registry_, pool_.get(), admission_.get(), metrics, options);
  }

  // A Call whose RPC finish sets `finished_` and notifies `done_`.
  std::unique_ptr<Call> NewCall(const CallMethod* method = nullptr) {
    return std::make_unique<Call>(pipeline_.get(), method != nullptr ? method : execute_, &ctx_,
                                  [this](const absl::Status& status) {
                                    ++finishes_;
                                    finished_ = status;
                                    done_.Notify();
                                  });
  }

  double Sample(const std::string& name, const std::map<std::string, std::string>& labels) {
    const std::string body =
        prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
    absl::StatusOr<double> v = testing::FindSample(body, name, labels);
    return v.ok() ? *v : -1;
  }

  OpRegistry registry_;
  std::unique_ptr<Metrics> metrics_;
  const CallMethod* execute_ = nullptr;
  const CallMethod* execute_stream_ = nullptr;
  const CallMethod* rest_ = nullptr;
  std::unique_ptr<AdmissionController> admission_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CallPipeline> pipeline_;
  FakeCallContext ctx_;
  Notification done_;
  std::atomic<int> finishes_{0};
  absl::Status finished_;
};

TEST_F(CallTest, RunsOnThePoolThenFinishesOnceAndGivesBackTheBudget) {
  CallPipeline::Options pool_only;
  pool_only.inline_max_bytes = 0;  // small calls run inline by default
  SetUpPipeline(4, pool_only);
  std::unique_ptr<Call> call = NewCall();
  ASSERT_TRUE(call->Open().ok());
  call->SetOp("Roll-7", registry_.Find("Roll-7"));
  ASSERT_TRUE(call->Admit(1000, Queue::kNow).ok());
  EXPECT_EQ(admission_->inflight_bytes(), 1000);
  EXPECT_EQ(Sample("tensorops_inflight_bytes", {}), 1000);
  std::thread::id kernel_thread;
  call->Run(
      100,
      [&](ThreadPool* pool, int64_t min_parallel_bytes) {
        EXPECT_EQ(pool, pool_.get());
        EXPECT_EQ(min_parallel_bytes, int64_t{1} << 20);
        kernel_thread = std::this_thread::get_id();
        return absl::OkStatus();
      },
      [&](absl::Status status) {
        EXPECT_TRUE(status.ok()) << status;
        call->Finish(status, 10, 20);
      });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_NE(kernel_thread, std::this_thread::get_id());
  EXPECT_TRUE(finished_.ok());
  call->Finish(absl::InternalError("again"), 0, 0);  // ignored: a call ends once
  EXPECT_EQ(finishes_.load(), 1);
  // The ticket is held until the reply has left (the reactor's OnDone
  // destroys the Call), not just until Finish.
  EXPECT_EQ(admission_->queued(), 0);
  EXPECT_EQ(admission_->inflight_requests(), 1);
  EXPECT_EQ(Sample("tensorops_inflight_bytes", {}), 1000);
  call.reset();
  EXPECT_EQ(admission_->inflight_requests(), 0);
  EXPECT_EQ(Sample("tensorops_inflight_bytes", {}), 0);
  // The alias counts under the canonical name.
  EXPECT_EQ(
      Sample("tensorops_requests_total", {{"method", "Execute"}, {"op", "Roll"}, {"code", "OK"}}),
      1);
  EXPECT_EQ(Sample("tensorops_queue_duration_seconds_count", {{"op", "Roll"}}), 1);
  EXPECT_EQ(Sample("tensorops_kernel_duration_seconds_count", {{"op", "Roll"}}), 1);
  EXPECT_EQ(Sample("tensorops_request_size_bytes_sum", {{"op", "Roll"}}), 10);
  EXPECT_EQ(Sample("tensorops_response_size_bytes_sum", {{"op", "Roll"}}), 20);
}

TEST_F(CallTest, SmallOutputsRunInlineWhenAllowed) {
  CallPipeline::Options options;
  options.inline_max_bytes = 4096;
  SetUpPipeline(4, options);
  for (const int64_t output_bytes : {int64_t{4095}, int64_t{4096}}) {
    SCOPED_TRACE(output_bytes);
    Notification finished;
    auto call = std::make_unique<Call>(pipeline_.get(), execute_, &ctx_,
                                       [&](const absl::Status&) { finished.Notify(); });
    ASSERT_TRUE(call->Admit(1, Queue::kNow).ok());
    std::thread::id kernel_thread;
    call->Run(
        output_bytes,
        [&](ThreadPool*, int64_t) {
          kernel_thread = std::this_thread::get_id();
          return absl::OkStatus();
        },
        [&](absl::Status status) { call->Finish(status, 0, 0); });
    ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_EQ(kernel_thread == std::this_thread::get_id(), output_bytes < 4096);
  }
}

TEST_F(CallTest, KernelErrorReachesAfterAndTheRpc) {
  SetUpPipeline(4);
  std::unique_ptr<Call> call = NewCall(execute_stream_);
  call->SetOp("Reverse", registry_.Find("Reverse"));
  ASSERT_TRUE(call->Admit(64, Queue::kLater).ok());
  ASSERT_TRUE(call->EnterQueue().ok());
  call->Run(
      8, [](ThreadPool*, int64_t) { return absl::InternalError("kernel broke"); },
      [&](absl::Status status) { call->Finish(status, 64, 0); });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(finished_.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(finished_.message(), "kernel broke");
  EXPECT_EQ(Sample("tensorops_requests_total",
                   {{"method", "ExecuteStream"}, {"op", "Reverse"}, {"code", "INTERNAL"}}),
            1);
  EXPECT_EQ(Sample("tensorops_stream_bytes_total", {{"op", "Reverse"}, {"direction", "received"}}),
            64);
  call.reset();
  EXPECT_EQ(admission_->inflight_requests(), 0);
}

TEST_F(CallTest, AbortedDrainDropsQueuedCallsWithoutRunningThem) {
  SetUpPipeline(4);
  std::unique_ptr<Call> call = NewCall();
  call->SetOp("Reverse", registry_.Find("Reverse"));
  ASSERT_TRUE(call->Admit(64, Queue::kNow).ok());
  pipeline_->AbortQueued();
  bool ran = false;
  call->Run(
      8,
      [&](ThreadPool*, int64_t) {
        ran = true;
        return absl::OkStatus();
      },
      [&](absl::Status status) { call->Finish(status, 0, 0); });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(ran);
  EXPECT_EQ(finished_.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Sample("tensorops_dropped_requests_total", {{"op", "Reverse"}, {"reason", "shutdown"}}),
            1);
  EXPECT_EQ(Sample("tensorops_kernel_duration_seconds_count", {{"op", "Reverse"}}), 0);
  call.reset();
  EXPECT_EQ(admission_->inflight_requests(), 0);
}

TEST_F(CallTest, RefusedAdmissionIsCountedAndHoldsNothing) {
  SetUpPipeline(1);
  {
    std::unique_ptr<Call> first = NewCall();
    ASSERT_TRUE(first->Admit(10, Queue::kNow).ok());
    Call second(pipeline_.get(), execute_, &ctx_, [](const absl::Status&) {});
    absl::Status s = second.Admit(10, Queue::kNow);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "queue"}}), 1);
    Call stream(pipeline_.get(), execute_stream_, &ctx_, [](const absl::Status&) {});
    ASSERT_TRUE(stream.Admit(10, Queue::kLater).ok());
    EXPECT_EQ(stream.EnterQueue().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "queue"}}), 2);
    stream.Finish(absl::ResourceExhaustedError("queue full"), 0, 0);
    first->Finish(absl::CancelledError("test over"), 0, 0);
    second.Finish(s, 0, 0);
    EXPECT_EQ(admission_->inflight_bytes(), 20);  // first and stream, until destroyed
  }
  EXPECT_EQ(admission_->inflight_requests(), 0);
  EXPECT_EQ(admission_->inflight_bytes(), 0);
  // Closed for a drain: UNAVAILABLE, which is not a limit and not counted.
  admission_->Close();
  Call late(pipeline_.get(), execute_, &ctx_, [](const absl::Status&) {});
  EXPECT_EQ(late.Admit(10, Queue::kNow).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "queue"}}), 2);
  EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 0);
}

TEST_F(CallTest, GateRefusesWhileDraining) {
  SetUpPipeline(4);
  std::unique_ptr<Call> call = NewCall();
  EXPECT_TRUE(call->Open().ok());
  pipeline_->StartDraining();
  std::unique_ptr<Call> late = NewCall();
  absl::Status s = late->Open();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  late->Finish(s, 0, 0);
  EXPECT_EQ(finished_.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Sample("tensorops_requests_total",
                   {{"method", "Execute"}, {"op", "unknown"}, {"code", "UNAVAILABLE"}}),
            1);
}

TEST_F(CallTest, GateWantsTheBearerTokenWhenConfigured) {
  CallPipeline::Options options;
  options.auth_token = "s3cret";
  SetUpPipeline(4, options);
  // A context without metadata: no token.
  absl::Status s = pipeline_->Gate(ctx_);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message().find("s3cret"), absl::string_view::npos);
}

TEST_F(CallTest, GateReadsTheDoorsCallContext) {
  CallPipeline::Options options;
  options.auth_token = "s3cret";
  SetUpPipeline(4, options);
  struct Row {
    std::optional<absl::string_view> authorization;
    absl::string_view carrier;
    bool retried;
    absl::StatusCode code;
    absl::string_view message;
  };
  const Row rows[] = {
      {std::nullopt, "", false, absl::StatusCode::kUnauthenticated,
       "missing \"authorization: Bearer <token>\""},
      {std::nullopt, "metadata", true, absl::StatusCode::kUnauthenticated,
       "missing \"authorization: Bearer <token>\" metadata"},
      {"Bearer wrong", "", false, absl::StatusCode::kUnauthenticated, "invalid bearer token"},
      {"Bearer s3cret", "metadata", true, absl::StatusCode::kOk, ""},
  };
  int retried = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.message);
    FakeCallContext ctx;
    ctx.authorization_ = row.authorization;
    ctx.carrier_ = row.carrier;
    ctx.retried_ = row.retried;
    const absl::Status s = pipeline_->Gate(ctx);
    EXPECT_EQ(s.code(), row.code);
    EXPECT_EQ(s.message(), row.message);
    if (row.retried) ++retried;
    EXPECT_EQ(Sample("tensorops_retried_calls_total", {}), retried);
  }
}

TEST_F(CallTest, QueuedCallIsDroppedPastItsDeadlineOrWhenCancelled) {
  SetUpPipeline(4);
  struct Row {
    absl::Time deadline;
    bool cancelled;
    absl::StatusCode code;
  };
  const Row rows[] = {
      {absl::InfiniteFuture(), false, absl::StatusCode::kOk},
      {absl::Now() - absl::Seconds(1), false, absl::StatusCode::kDeadlineExceeded},
      {absl::InfiniteFuture(), true, absl::StatusCode::kCancelled},
      // The deadline is checked first: gRPC also cancels a call past it.
      {absl::Now() - absl::Seconds(1), true, absl::StatusCode::kDeadlineExceeded},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat(static_cast<int>(row.code), " cancelled=", row.cancelled));
    FakeCallContext ctx;
    ctx.deadline_ = row.deadline;
    ctx.cancelled_ = row.cancelled;
    absl::Status finished;
    Call call(pipeline_.get(), execute_, &ctx, [&](const absl::Status& s) { finished = s; });
    ASSERT_TRUE(call.Admit(1, Queue::kNow).ok());
    bool ran = false;
    call.Run(  // 1 byte of output: runs inline, so Finish has run on return
        1,
        [&](ThreadPool*, int64_t) {
          ran = true;
          return absl::OkStatus();
        },
        [&](absl::Status status) { call.Finish(status, 0, 0); });
    EXPECT_EQ(finished.code(), row.code);
    EXPECT_EQ(ran, row.code == absl::StatusCode::kOk);
  }
}

TEST_F(CallTest, HeldReservationBecomesTheTicketAndIsCountedOnce) {
  SetUpPipeline(4);
  {
    // A door reserved the request's bytes as they arrived, in two steps.
    AdmissionTicket reservation;
    ASSERT_TRUE(pipeline_->Reserve(1000, &reservation).ok());
    ASSERT_TRUE(pipeline_->Reserve(3000, &reservation).ok());
    EXPECT_EQ(admission_->inflight_bytes(), 3000);
    EXPECT_EQ(admission_->inflight_requests(), 0);
    // Past the budget (1 MiB): refused, counted, the reservation unchanged.
    EXPECT_EQ(pipeline_->Reserve((1 << 20) + 1, &reservation).code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 1);
    EXPECT_EQ(admission_->inflight_bytes(), 3000);
    std::unique_ptr<Call> call = NewCall(rest_);
    call->HoldReservation(std::move(reservation));
    // Request (3000, already held) + output: 5000 in all, not 8000.
    ASSERT_TRUE(call->Admit(5000, Queue::kNow).ok());
    EXPECT_EQ(admission_->inflight_bytes(), 5000);
    EXPECT_EQ(admission_->inflight_requests(), 1);
    call->Finish(absl::CancelledError("test over"), 0, 0);
  }
  EXPECT_EQ(admission_->inflight_bytes(), 0);
  EXPECT_EQ(admission_->inflight_requests(), 0);
  EXPECT_EQ(admission_->queued(), 0);
  {
    // Refused at admission: the reservation stays the call's until it goes.
    AdmissionTicket reservation;
    ASSERT_TRUE(pipeline_->Reserve(1000, &reservation).ok());
    Call call(pipeline_.get(), rest_, &ctx_, [](const absl::Status&) {});
    call.HoldReservation(std::move(reservation));
    EXPECT_EQ(call.Admit((1 << 20) + 1, Queue::kNow).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 2);
    EXPECT_EQ(admission_->inflight_bytes(), 1000);
    call.Finish(absl::ResourceExhaustedError("refused"), 0, 0);
  }
  EXPECT_EQ(admission_->inflight_bytes(), 0);
}

// A prepared call of `output` bytes whose kernel only counts its runs.
class CountingCall final : public PreparedCall {
 public:
  CountingCall(int64_t output, std::atomic<int>* runs) : output_(output), runs_(runs) {}
  int64_t output_bytes() const override { return output_; }
  absl::Status Run(ThreadPool*, int64_t) override {
    ++*runs_;
    return absl::OkStatus();
  }

 private:
  const int64_t output_;
  std::atomic<int>* const runs_;
};

// A unary call refused only because the budget is busy waits for it
// (Options::budget_wait) and runs once the bytes come back; past the wait it
// is refused, and counted, as before.
TEST_F(CallTest, UnaryCallWaitsForABusyBudgetThenRunsOrIsRefusedAtTheWaitsEnd) {
  CallPipeline::Options options;
  options.budget_wait = absl::Milliseconds(300);
  SetUpPipeline(4, options);  // a budget of 1 MiB
  auto holder =
      std::make_unique<Call>(pipeline_.get(), execute_, &ctx_, [](const absl::Status&) {});
  ASSERT_TRUE(holder->Admit(900 << 10, Queue::kNow).ok());
  std::atomic<int> runs{0};
  auto run_unary = [&](Call* call) {
    call->RunUnary(
        "Roll", 100 << 10,
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          return std::make_unique<CountingCall>(100 << 10, &runs);
        },
        [] { return int64_t{0}; });
  };
  // 200 KiB do not fit the 100 KiB left: refused after the wait.
  const absl::Time t0 = absl::Now();
  std::unique_ptr<Call> late = NewCall();
  run_unary(late.get());
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(300));
  EXPECT_EQ(finished_.code(), absl::StatusCode::kResourceExhausted) << finished_;
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 1);
  late.reset();

  // The same call again, and the holder's bytes come back while it waits.
  Notification admitted_done;
  absl::Status admitted_status;
  auto waiting =
      std::make_unique<Call>(pipeline_.get(), execute_, &ctx_, [&](const absl::Status& status) {
        admitted_status = status;
        admitted_done.Notify();
      });
  run_unary(waiting.get());
  EXPECT_EQ(admission_->waiting(), 1);
  holder->Finish(absl::OkStatus(), 0, 0);
  holder.reset();  // its ticket goes back: the waiter is admitted and runs
  ASSERT_TRUE(admitted_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(admitted_status.ok()) << admitted_status;
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(admission_->waiting(), 0);
  EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 1);
  waiting.reset();
  EXPECT_EQ(admission_->inflight_bytes(), 0);
}

}  // namespace
}  // namespace tensorops
