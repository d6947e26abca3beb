// Admission control: bounds the number of requests waiting for a kernel
// thread and the bytes (request + response) of all admitted requests, so an
// overload is answered with RESOURCE_EXHAUSTED instead of an unbounded queue
// or an out-of-memory death.
//
// A call that is let in holds an AdmissionTicket: its bytes of the budget
// and, while it waits for a kernel thread, a queue slot. Dropping the ticket
// gives both back, so no exit path of a call can leak budget.
//
// Example:
//   AdmissionController::Limit limit;
//   absl::StatusOr<AdmissionTicket> ticket =
//       admission.Admit(bytes, AdmissionController::Queue::kNow, &limit);
//   if (!ticket.ok()) return ticket.status();  // RESOURCE_EXHAUSTED; `limit` says which
//   ... ticket->LeaveQueue() when the kernel starts ...
//   // ~AdmissionTicket (or Release()) returns the bytes.
//
// Bytes a front door must hold before its call can be prepared (an HTTP
// body, read before it can be decoded) are counted as they arrive with a
// reservation: Reserve() takes bytes only, Resize() grows it in steps, and
// the call's admission (AdmitReserved) turns it into the call's ticket, so
// the request is counted once, from its first byte to the answer. A
// reservation is not a request in flight (WaitIdle does not wait for a body
// still arriving: the drain refuses it anyway).
//
// A call refused only because the budget is busy (it fits the budget, not
// what is free of it) may wait for it a short, bounded time (WaitForBytes):
// first come, first served, and ahead of every new request (Admit and
// Reserve count what waits as taken). This is what lets both doors in when
// they share one budget under a burst: an HTTP body is reserved when its
// header arrives, a gRPC message only once it has arrived whole, so without
// the wait a REST burst takes the whole budget before the first gRPC call
// of the same burst can ask for it (docs/reliability.md, "Memory limit").
//
// Thread-safety: AdmissionController's methods are safe from any thread; a
// waiter's callback runs on the thread that freed the bytes, the timer
// thread, or the caller's (never with the lock held). An AdmissionTicket
// belongs to one call and is used by one thread at a time.
#ifndef TENSOROPS_SERVER_CORE_ADMISSION_H_
#define TENSOROPS_SERVER_CORE_ADMISSION_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tensorops {

class AdmissionTicket;

// UNAVAILABLE with `message` for a call refused because the server drains,
// with google.rpc.RetryInfo (retry at once, elsewhere) and ErrorInfo
// "DRAINING" (wire/status_details.h), as every refusal the server decides
// itself carries its details.
absl::Status DrainingError(absl::string_view message);

class AdmissionController {
 public:
  enum class Limit { kNone, kQueue, kInflightBytes };
  // kNow: the call is ready to run and takes a queue slot with its bytes.
  // kLater: bytes only (a streamed call, whose data arrives over time); the
  // ticket's EnterQueue() takes the slot once the upload is complete.
  enum class Queue { kNow, kLater };
  // Told every change of (admitted requests, their bytes, queued requests),
  // with the controller's lock held: keep it cheap (a gauge Set).
  using Observer = std::function<void(int64_t inflight, int64_t bytes, int64_t queued)>;

  // Told once how a wait ended: OK (the ticket is admitted) or the refusal.
  using WaitDone = absl::AnyInvocable<void(absl::Status) &&>;

  AdmissionController(int64_t max_queue, int64_t max_inflight_bytes, Observer observer = nullptr)
      : max_queue_(max_queue),
        max_inflight_bytes_(max_inflight_bytes),
        observer_(std::move(observer)) {}
  // Refuses what still waits (UNAVAILABLE) and stops the timer thread.
  ~AdmissionController();
  AdmissionController(const AdmissionController&) = delete;
  AdmissionController& operator=(const AdmissionController&) = delete;

  // Takes `bytes` of the budget (and with Queue::kNow a queue slot), or
  // returns RESOURCE_EXHAUSTED saying which limit (and sets *limit), or
  // UNAVAILABLE once Close()d (*limit stays kNone).
  absl::StatusOr<AdmissionTicket> Admit(int64_t bytes, Queue queue, Limit* limit);
  // A reservation of `bytes` (no request in flight, no queue slot): refused
  // as Admit (RESOURCE_EXHAUSTED naming --max_inflight_bytes, UNAVAILABLE
  // once Close()d). Grown with AdmissionTicket::Resize, made a call's ticket
  // with AdmissionTicket::AdmitReserved.
  absl::StatusOr<AdmissionTicket> Reserve(int64_t bytes, Limit* limit);
  // After Admit or a reservation's AdmitReserved was refused with
  // `refusal`, INFLIGHT_BYTES_EXHAUSTED (the budget busy): waits until
  // `bytes` fit, then admits `ticket` (empty, or the reservation) for them,
  // with a queue slot for Queue::kNow (none for kLater: a stream's upload
  // takes it later), as those would, and calls done(OK). `held` is what
  // the waiter already holds in memory outside the budget (a gRPC message
  // received whole; 0 for an HTTP body, which its reservation counts). At
  // `until`, at Close(), or at once when what the waiters hold would pass
  // the whole budget, done gets `refusal` (UNAVAILABLE at Close;
  // RESOURCE_EXHAUSTED naming --max_queue when the bytes fit but the queue
  // is full). `gone` (may be null; called with the lock held, from any
  // thread: keep it cheap and lock-free of this controller) says the call's
  // client has left: such a waiter gets CANCELLED within kGonePoll instead
  // of holding its place at the head of the line until `until`. `done` runs
  // exactly once, possibly before WaitForBytes returns; `ticket` must stay
  // put until then.
  void WaitForBytes(AdmissionTicket* ticket, int64_t bytes, Queue queue, int64_t held,
                    absl::Time until, absl::Status refusal, std::function<bool()> gone,
                    WaitDone done);
  // How often the timer asks waiters' `gone` while any wait.
  static constexpr absl::Duration kGonePoll = absl::Milliseconds(50);
  // The drain: from now on Admit refuses with UNAVAILABLE, so once WaitIdle
  // returns true nothing is admitted any more; waiting calls are refused.
  // A ticket's EnterQueue still works for streams admitted before (their
  // upload may go on).
  void Close();

  int64_t queued() const;
  int64_t inflight_requests() const;
  int64_t inflight_bytes() const;
  // Calls waiting in WaitForBytes.
  int64_t waiting() const;
  // Waits until no request is in flight, or until `deadline`. True if none is.
  bool WaitIdle(absl::Time deadline);

 private:
  friend class AdmissionTicket;

  struct Waiter {
    AdmissionTicket* ticket;
    int64_t growth;  // what the ticket grows by when admitted
    Queue queue;     // kNow: it takes a queue slot when admitted
    int64_t held;    // what it holds in memory outside the budget meanwhile
    absl::Time until;
    absl::Status refusal;
    std::function<bool()> gone;
    WaitDone done;
  };
  // Waiters and how each ended, run outside the lock.
  using Ended = std::vector<std::pair<WaitDone, absl::Status>>;

  // All with mu_ held.
  absl::Status CheckOpen() const;
  absl::Status CheckQueue(Limit* limit) const;
  // A new request: what waits counts as taken (waiters come first).
  absl::Status CheckBytes(int64_t bytes, Limit* limit) const;
  // A ticket holding `held` growing to `bytes` (> held), behind `ahead`
  // bytes of waiters (a new reservation) or none (a ticket already held).
  absl::Status CheckGrowth(int64_t held, int64_t bytes, int64_t ahead, Limit* limit) const;
  void Notify() const;
  // Ends the waiters whose client left (CANCELLED), admits the waiters at
  // the head that fit now, refuses those past their time; appends them to
  // *ended.
  // Every waiter ended with the shutdown's refusal (Close, the destructor).
  void EndWaitersLocked(Ended* ended);
  void Pump(absl::Time now, Ended* ended);
  // Ends (out of line, appended to *ended with status_of(waiter)) every
  // waiter for which pred(waiter) holds.
  template <typename Pred, typename StatusOf>
  void EndWaitersIf(Pred pred, Ended* ended, StatusOf status_of);
  // Runs each ended waiter's callback (mu_ not held).
  static void RunEnded(Ended ended);
  void TimerLoop();

  // For AdmissionTicket.
  absl::Status EnterQueue(Limit* limit);
  void LeaveQueue();
  absl::Status Resize(AdmissionTicket* ticket, int64_t bytes, Limit* limit);
  absl::Status AdmitReserved(AdmissionTicket* ticket, int64_t bytes, Queue queue, Limit* limit);
  void Release(int64_t bytes, bool request);

  const int64_t max_queue_;
  const int64_t max_inflight_bytes_;
  const Observer observer_;
  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  mutable std::mutex mu_;
  std::condition_variable idle_;  // inflight_ reached 0
  int64_t queued_ = 0;            // guarded by mu_
  int64_t inflight_ = 0;          // guarded by mu_
  int64_t bytes_ = 0;             // guarded by mu_
  bool closed_ = false;           // guarded by mu_
  std::deque<Waiter> waiters_;    // guarded by mu_; first come first
  int64_t waiting_bytes_ = 0;     // guarded by mu_: what the waiters ask for
  // Guarded by mu_: what the waiters hold outside the budget. Bounded by the
  // budget: it is memory no ticket counts. What they ask for is not bounded
  // here (it is not taken until they are admitted, and `until` bounds the
  // wait): a REST call waiting for its output's bytes holds nothing new.
  int64_t waiting_held_ = 0;
  // Refuses waiters at their time when nothing frees bytes before it;
  // started with the first waiter.
  std::thread timer_;
  std::condition_variable timer_cv_;  // a new waiter, or stop
  bool stop_ = false;                 // guarded by mu_
};

// One admitted call's share of the controller: move-only; empty when
// default-constructed or moved from. The controller must outlive it.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }

  bool held() const { return controller_ != nullptr; }
  int64_t bytes() const { return bytes_; }
  bool queued() const { return queued_; }
  // False for a reservation (AdmissionController::Reserve) not yet admitted.
  bool request() const { return request_; }

  // Holds `bytes` from now on. Shrinking always succeeds; growing is checked
  // against the budget like Admit and, when refused, changes nothing
  // (RESOURCE_EXHAUSTED, *limit kInflightBytes). Admission being closed does
  // not stop a ticket from growing (a call admitted before the drain goes on).
  absl::Status Resize(int64_t bytes, AdmissionController::Limit* limit);
  // Makes a reservation the ticket of an admitted call of `bytes` in all
  // (the reserved bytes included) and, with Queue::kNow, a queue slot:
  // checked as Admit (closed, queue, only the growth against the budget).
  // Refused, the reservation stays as it was.
  absl::Status AdmitReserved(int64_t bytes, AdmissionController::Queue queue,
                             AdmissionController::Limit* limit);

  // A ticket admitted with Queue::kLater takes its queue slot, or returns
  // RESOURCE_EXHAUSTED (and sets *limit) when the queue is full.
  absl::Status EnterQueue(AdmissionController::Limit* limit);
  // The call left the queue (its kernel task started). No-op if not queued.
  void LeaveQueue();
  // Gives back the queue slot (if still held) and the bytes. Idempotent.
  void Release();

 private:
  friend class AdmissionController;
  AdmissionTicket(AdmissionController* controller, int64_t bytes, bool queued, bool request)
      : controller_(controller), bytes_(bytes), queued_(queued), request_(request) {}

  AdmissionController* controller_ = nullptr;
  int64_t bytes_ = 0;
  bool queued_ = false;
  bool request_ = false;  // counted in the controller's inflight requests
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_ADMISSION_H_
