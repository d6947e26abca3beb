// AdmissionController and its RAII AdmissionTicket, in-process.
#include "server/core/admission.h"

#include <cstdint>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace tensorops
