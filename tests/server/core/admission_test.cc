// AdmissionController and its RAII AdmissionTicket, in-process.
#include "server/core/admission.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

using Queue = AdmissionController::Queue;
using Limit = AdmissionController::Limit;
using State = std::tuple<int64_t, int64_t, int64_t>;  // inflight, bytes, queued

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionController MakeController(int64_t max_queue, int64_t max_bytes) {
    return AdmissionController(max_queue, max_bytes, [this](int64_t i, int64_t b, int64_t q) {
      seen_.emplace_back(i, b, q);
    });
  }
  std::vector<State> seen_;
};

TEST_F(AdmissionTest, TicketGivesBackItsBytesAndSlotWhenDestroyed) {
  AdmissionController admission = MakeController(4, 1000);
  Limit limit;
  {
    absl::StatusOr<AdmissionTicket> t = admission.Admit(300, Queue::kNow, &limit);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(limit, Limit::kNone);
    EXPECT_TRUE(t->held());
    EXPECT_TRUE(t->queued());
    EXPECT_EQ(admission.inflight_bytes(), 300);
    EXPECT_EQ(admission.queued(), 1);
  }
  EXPECT_EQ(admission.inflight_requests(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 0);
  EXPECT_EQ(admission.queued(), 0);
  // The observer saw every step: admitted, queue slot back, bytes back.
  EXPECT_EQ(seen_, (std::vector<State>{{1, 300, 1}, {1, 300, 0}, {0, 0, 0}}));
}

TEST_F(AdmissionTest, MovedTicketReleasesOnce) {
  AdmissionController admission = MakeController(4, 1000);
  Limit limit;
  absl::StatusOr<AdmissionTicket> t = admission.Admit(100, Queue::kNow, &limit);
  ASSERT_TRUE(t.ok());
  AdmissionTicket moved = *std::move(t);
  EXPECT_FALSE(t->held());
  EXPECT_TRUE(moved.held());
  moved.LeaveQueue();
  EXPECT_EQ(admission.queued(), 0);
  moved.LeaveQueue();  // a second time: no-op
  EXPECT_EQ(admission.queued(), 0);
  AdmissionTicket other;
  other = std::move(moved);
  other.Release();
  other.Release();
  EXPECT_EQ(admission.inflight_requests(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 0);
}

TEST_F(AdmissionTest, RefusalsSayWhichLimit) {
  struct Row {
    const char* name;
    int64_t max_queue;
    int64_t max_bytes;
    int64_t held_bytes;  // admitted first, queued
    int64_t bytes;
    Queue queue;
    Limit want;
  };
  const Row rows[] = {
      {"queue full", 1, 1000, 10, 10, Queue::kNow, Limit::kQueue},
      {"bytes alone too many", 4, 1000, 0, 1001, Queue::kNow, Limit::kInflightBytes},
      {"budget used up", 4, 1000, 900, 101, Queue::kNow, Limit::kInflightBytes},
      {"stream ignores a full queue", 1, 1000, 10, 10, Queue::kLater, Limit::kNone},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    AdmissionController admission(row.max_queue, row.max_bytes);
    Limit limit;
    absl::StatusOr<AdmissionTicket> first;
    if (row.held_bytes > 0) {
      first = admission.Admit(row.held_bytes, Queue::kNow, &limit);
      ASSERT_TRUE(first.ok());
    }
    absl::StatusOr<AdmissionTicket> t = admission.Admit(row.bytes, row.queue, &limit);
    EXPECT_EQ(limit, row.want);
    EXPECT_EQ(t.ok(), row.want == Limit::kNone) << t.status();
    if (!t.ok()) EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  }
}

TEST_F(AdmissionTest, StreamTicketTakesItsQueueSlotLater) {
  AdmissionController admission = MakeController(1, 1000);
  Limit limit;
  absl::StatusOr<AdmissionTicket> other = admission.Admit(10, Queue::kNow, &limit);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<AdmissionTicket> stream = admission.Admit(20, Queue::kLater, &limit);
  ASSERT_TRUE(stream.ok());
  EXPECT_FALSE(stream->queued());
  absl::Status s = stream->EnterQueue(&limit);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(limit, Limit::kQueue);
  other->LeaveQueue();
  EXPECT_TRUE(stream->EnterQueue(&limit).ok());
  EXPECT_TRUE(stream->queued());
  EXPECT_EQ(admission.queued(), 1);
  // Released while still queued: the slot comes back too.
  stream->Release();
  EXPECT_EQ(admission.queued(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 10);
  AdmissionTicket empty;
  EXPECT_EQ(empty.EnterQueue(&limit).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AdmissionTest, ClosedRefusesNewCallsButLetsAdmittedStreamsQueue) {
  AdmissionController admission(4, 1000);
  Limit limit;
  absl::StatusOr<AdmissionTicket> stream = admission.Admit(10, Queue::kLater, &limit);
  ASSERT_TRUE(stream.ok());
  admission.Close();
  for (Queue queue : {Queue::kNow, Queue::kLater}) {
    absl::StatusOr<AdmissionTicket> t = admission.Admit(10, queue, &limit);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(limit, Limit::kNone);
  }
  EXPECT_TRUE(stream->EnterQueue(&limit).ok());
}

TEST_F(AdmissionTest, WaitIdleReturnsWhenTheLastTicketGoes) {
  AdmissionController admission(4, 1000);
  Limit limit;
  absl::StatusOr<AdmissionTicket> t = admission.Admit(10, Queue::kNow, &limit);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(admission.WaitIdle(absl::Now() + absl::Milliseconds(20)));
  std::thread releaser([&t] {
    absl::SleepFor(absl::Milliseconds(20));
    t->Release();
  });
  EXPECT_TRUE(admission.WaitIdle(absl::Now() + absl::Seconds(10)));
  releaser.join();
}

TEST_F(AdmissionTest, ReservationCountsBytesGrowsAndBecomesTheCallsTicket) {
  AdmissionController admission = MakeController(1, 1000);
  Limit limit;
  // A body arriving: bytes only, not a request in flight, no queue slot.
  absl::StatusOr<AdmissionTicket> r = admission.Reserve(100, &limit);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->request());
  EXPECT_EQ(admission.inflight_bytes(), 100);
  EXPECT_EQ(admission.inflight_requests(), 0);
  EXPECT_TRUE(admission.WaitIdle(absl::Now()));  // the drain does not wait for it
  // It grows as bytes come; a step past the budget is refused and changes nothing.
  EXPECT_TRUE(r->Resize(600, &limit).ok());
  EXPECT_EQ(admission.inflight_bytes(), 600);
  const absl::Status over = r->Resize(1001, &limit);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("--max_inflight_bytes=1000"), absl::string_view::npos) << over;
  EXPECT_EQ(limit, Limit::kInflightBytes);
  absl::StatusOr<AdmissionTicket> other = admission.Admit(300, Queue::kLater, &limit);
  ASSERT_TRUE(other.ok());
  const absl::Status full = r->Resize(800, &limit);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("needs 200 more"), absl::string_view::npos) << full;
  EXPECT_EQ(r->bytes(), 600);
  EXPECT_EQ(admission.inflight_bytes(), 900);
  // The call's admission: only the growth counts, the reservation is its ticket.
  EXPECT_TRUE(r->AdmitReserved(700, Queue::kNow, &limit).ok());
  EXPECT_TRUE(r->request());
  EXPECT_TRUE(r->queued());
  EXPECT_EQ(admission.inflight_bytes(), 1000);
  EXPECT_EQ(admission.inflight_requests(), 2);
  EXPECT_EQ(admission.queued(), 1);
  EXPECT_EQ(r->AdmitReserved(700, Queue::kNow, &limit).code(),
            absl::StatusCode::kFailedPrecondition);  // admitted already
  r->Release();
  other->Release();
  EXPECT_EQ(admission.inflight_bytes(), 0);
  EXPECT_EQ(admission.inflight_requests(), 0);
  EXPECT_EQ(admission.queued(), 0);
  AdmissionTicket empty;
  EXPECT_EQ(empty.Resize(10, &limit).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AdmissionTest, ReservationRefusalsAndShrinking) {
  AdmissionController admission = MakeController(1, 1000);
  Limit limit;
  absl::StatusOr<AdmissionTicket> too_big = admission.Reserve(1001, &limit);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(limit, Limit::kInflightBytes);
  // Admitted for less than it reserved (a chunked body's step ahead): shrinks.
  absl::StatusOr<AdmissionTicket> r = admission.Reserve(500, &limit);
  ASSERT_TRUE(r.ok());
  absl::StatusOr<AdmissionTicket> queued = admission.Admit(10, Queue::kNow, &limit);
  ASSERT_TRUE(queued.ok());
  // Refused (queue full): the reservation stays as it was, not a request.
  EXPECT_EQ(r->AdmitReserved(400, Queue::kNow, &limit).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(limit, Limit::kQueue);
  EXPECT_FALSE(r->request());
  EXPECT_EQ(admission.inflight_bytes(), 510);
  queued->Release();
  EXPECT_TRUE(r->AdmitReserved(400, Queue::kNow, &limit).ok());
  EXPECT_EQ(admission.inflight_bytes(), 400);
  // Closed (the drain): no new reservation, no reservation admitted.
  absl::StatusOr<AdmissionTicket> late = admission.Reserve(10, &limit);
  ASSERT_TRUE(late.ok());
  admission.Close();
  EXPECT_EQ(admission.Reserve(10, &limit).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(late->AdmitReserved(20, Queue::kLater, &limit).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(limit, Limit::kNone);
}

// A busy-budget refusal, then a wait for the bytes; the promise says how it ended.
struct Wait {
  std::promise<absl::Status> ended;
  std::future<absl::Status> result = ended.get_future();
  AdmissionController::WaitDone Done() {
    return [this](absl::Status s) { ended.set_value(std::move(s)); };
  }
  bool Ended() { return result.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
};

TEST_F(AdmissionTest, AWaiterIsAdmittedWhenBytesComeBackAheadOfNewRequests) {
  AdmissionController admission = MakeController(4, 100);
  Limit limit;
  absl::StatusOr<AdmissionTicket> held = admission.Admit(80, Queue::kNow, &limit);
  ASSERT_TRUE(held.ok());
  absl::StatusOr<AdmissionTicket> refused = admission.Admit(50, Queue::kNow, &limit);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(ErrorReason(refused.status()), "INFLIGHT_BYTES_EXHAUSTED");
  AdmissionTicket ticket;
  Wait wait;
  // A gRPC message of 20 received whole, with an output of 30.
  admission.WaitForBytes(&ticket, 50, Queue::kNow, 20, absl::Now() + absl::Seconds(60),
                         refused.status(), nullptr, wait.Done());
  EXPECT_FALSE(wait.Ended());
  EXPECT_EQ(admission.waiting(), 1);
  // 10 bytes would fit what is free, but the waiter comes first.
  absl::StatusOr<AdmissionTicket> newcomer = admission.Admit(10, Queue::kNow, &limit);
  EXPECT_EQ(ErrorReason(newcomer.status()), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_EQ(ErrorReason(admission.Reserve(10, &limit).status()), "INFLIGHT_BYTES_EXHAUSTED");
  // Another thread gives its bytes back: the waiter is admitted there.
  std::thread([&] { held->Release(); }).join();
  ASSERT_EQ(wait.result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(wait.result.get().ok());
  EXPECT_TRUE(ticket.held());
  EXPECT_TRUE(ticket.queued());
  EXPECT_TRUE(ticket.request());
  EXPECT_EQ(ticket.bytes(), 50);
  EXPECT_EQ(admission.waiting(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 50);
  EXPECT_EQ(admission.queued(), 1);
  ticket.Release();
  EXPECT_EQ(admission.inflight_requests(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 0);
}

// A stream's header waits as a unary call does, but is admitted for bytes
// only: its queue slot comes when its upload is complete (EnterQueue), so a
// full queue does not refuse it meanwhile.
TEST_F(AdmissionTest, AStreamWaiterIsAdmittedWithoutAQueueSlot) {
  AdmissionController admission = MakeController(1, 100);
  Limit limit;
  absl::StatusOr<AdmissionTicket> upload = admission.Admit(80, Queue::kLater, &limit);
  ASSERT_TRUE(upload.ok());
  absl::StatusOr<AdmissionTicket> queued = admission.Admit(10, Queue::kNow, &limit);
  ASSERT_TRUE(queued.ok());  // the only queue slot
  const absl::Status refusal = admission.Admit(50, Queue::kLater, &limit).status();
  ASSERT_EQ(ErrorReason(refusal), "INFLIGHT_BYTES_EXHAUSTED");
  AdmissionTicket ticket;
  Wait wait;
  admission.WaitForBytes(&ticket, 50, Queue::kLater, 0, absl::Now() + absl::Seconds(60), refusal,
                         nullptr, wait.Done());
  EXPECT_FALSE(wait.Ended());
  // The bytes come back while the queue is still full: a unary waiter would
  // be refused (QUEUE_FULL), the stream is admitted.
  std::thread([&] { upload->Release(); }).join();
  ASSERT_EQ(wait.result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(wait.result.get().ok());
  EXPECT_TRUE(ticket.held());
  EXPECT_FALSE(ticket.queued());
  EXPECT_TRUE(ticket.request());
  EXPECT_EQ(ticket.bytes(), 50);
  EXPECT_EQ(admission.queued(), 1);
  EXPECT_EQ(admission.inflight_requests(), 2);
  // Its upload complete, it takes the slot once there is one.
  EXPECT_EQ(ErrorReason(ticket.EnterQueue(&limit)), "QUEUE_FULL");
  queued->Release();
  ASSERT_TRUE(ticket.EnterQueue(&limit).ok());
  EXPECT_EQ(admission.queued(), 1);
  ticket.Release();
  EXPECT_EQ(admission.queued(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 0);
}

// A waiter whose client left gives up its place (CANCELLED) within
// kGonePoll, so the one behind it is not held back until its time.
TEST_F(AdmissionTest, AWaiterWhoseClientLeftStepsAsideForTheNext) {
  AdmissionController admission = MakeController(4, 100);
  Limit limit;
  absl::StatusOr<AdmissionTicket> held = admission.Admit(80, Queue::kNow, &limit);
  ASSERT_TRUE(held.ok());
  const absl::Status refusal = admission.Admit(50, Queue::kNow, &limit).status();
  std::atomic<bool> gone{false};
  AdmissionTicket first, second;
  Wait first_wait, second_wait;
  admission.WaitForBytes(
      &first, 50, Queue::kNow, 0, absl::Now() + absl::Seconds(60), refusal,
      [&gone] { return gone.load(); }, first_wait.Done());
  // 10 bytes fit what is free, but the first waiter comes first.
  admission.WaitForBytes(
      &second, 10, Queue::kNow, 0, absl::Now() + absl::Seconds(60), refusal, [] { return false; },
      second_wait.Done());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(first_wait.Ended());
  EXPECT_FALSE(second_wait.Ended());
  const absl::Time t0 = absl::Now();
  gone = true;
  ASSERT_EQ(first_wait.result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(first_wait.result.get().code(), absl::StatusCode::kCancelled);
  ASSERT_EQ(second_wait.result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(second_wait.result.get().ok());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_FALSE(first.held());
  EXPECT_EQ(second.bytes(), 10);
  EXPECT_EQ(admission.waiting(), 0);
  EXPECT_EQ(admission.inflight_bytes(), 90);
}

TEST_F(AdmissionTest, AWaiterIsRefusedAtItsTimeOrAtClose) {
  AdmissionController admission = MakeController(4, 100);
  Limit limit;
  absl::StatusOr<AdmissionTicket> held = admission.Admit(80, Queue::kNow, &limit);
  ASSERT_TRUE(held.ok());
  const absl::Status refusal = admission.Admit(50, Queue::kNow, &limit).status();
  // Nothing frees bytes: the timer refuses it at its time.
  AdmissionTicket timed;
  Wait wait;
  const absl::Time t0 = absl::Now();
  admission.WaitForBytes(&timed, 50, Queue::kNow, 20, t0 + absl::Milliseconds(100), refusal,
                         nullptr, wait.Done());
  ASSERT_EQ(wait.result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const absl::Status s = wait.result.get();
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(100));
  EXPECT_EQ(ErrorReason(s), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_TRUE(RetryDelay(s).has_value());
  EXPECT_FALSE(timed.held());
  EXPECT_EQ(admission.waiting(), 0);
  // The drain refuses what waits: UNAVAILABLE, as a new call.
  AdmissionTicket drained;
  Wait closed;
  admission.WaitForBytes(&drained, 50, Queue::kNow, 20, absl::Now() + absl::Seconds(60), refusal,
                         nullptr, closed.Done());
  admission.Close();
  ASSERT_TRUE(closed.Ended());
  EXPECT_EQ(closed.result.get().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(drained.held());
  EXPECT_EQ(admission.inflight_bytes(), 80);
}

TEST_F(AdmissionTest, AWaitingReservationBecomesTheTicketAndWaitersHoldAtMostOneBudget) {
  AdmissionController admission = MakeController(4, 100);
  Limit limit;
  absl::StatusOr<AdmissionTicket> held = admission.Admit(60, Queue::kNow, &limit);
  absl::StatusOr<AdmissionTicket> body = admission.Reserve(30, &limit);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(body.ok());
  // Its call needs 70 in all (40 more than the body's 30): 130 > 100.
  const absl::Status refusal = body->AdmitReserved(70, Queue::kNow, &limit);
  ASSERT_EQ(ErrorReason(refusal), "INFLIGHT_BYTES_EXHAUSTED");
  // The body is counted by its reservation: it holds nothing outside the budget.
  Wait wait;
  admission.WaitForBytes(&*body, 70, Queue::kNow, 0, absl::Now() + absl::Seconds(60), refusal,
                         nullptr, wait.Done());
  // Messages received whole wait while what they hold fits the budget once:
  // 60 does, and asks for more than is free behind the body (what they ask
  // for is bounded by their time, not here); another 50 would make 110.
  AdmissionTicket second;
  Wait second_wait;
  admission.WaitForBytes(&second, 90, Queue::kNow, 60, absl::Now() + absl::Seconds(60), refusal,
                         nullptr, second_wait.Done());
  AdmissionTicket third;
  Wait full;
  admission.WaitForBytes(&third, 60, Queue::kNow, 50, absl::Now() + absl::Seconds(60), refusal,
                         nullptr, full.Done());
  ASSERT_TRUE(full.Ended());
  EXPECT_EQ(ErrorReason(full.result.get()), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_FALSE(wait.Ended());
  EXPECT_FALSE(second_wait.Ended());
  EXPECT_EQ(admission.waiting(), 2);
  // First come, first served: the body first (30 + 40), the second behind it.
  held->Release();
  ASSERT_TRUE(wait.Ended());
  EXPECT_TRUE(wait.result.get().ok());
  EXPECT_FALSE(second_wait.Ended());
  EXPECT_TRUE(body->request());
  EXPECT_EQ(body->bytes(), 70);
  EXPECT_EQ(admission.inflight_bytes(), 70);
  EXPECT_EQ(admission.inflight_requests(), 1);
  body->Release();
  ASSERT_TRUE(second_wait.Ended());
  EXPECT_TRUE(second_wait.result.get().ok());
  EXPECT_EQ(second.bytes(), 90);
  EXPECT_EQ(admission.waiting(), 0);
  second.Release();
  EXPECT_EQ(admission.inflight_bytes(), 0);
}

}  // namespace
}  // namespace tensorops
