#include "server/core/admission.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

// When a refused caller may come back (google.rpc.RetryInfo, REST's
// Retry-After, gRPC's retry pushback). A queue slot frees when a kernel
// finishes (a 16 MiB op takes a few ms); bytes free when a reply has left,
// which for a big call is the client's download: longer.
constexpr absl::Duration kQueueRetryDelay = absl::Milliseconds(50);
constexpr absl::Duration kBytesRetryDelay = absl::Milliseconds(100);
// A draining replica: the caller should go to another one, but not at once:
// a balancer keeps sending calls to a draining replica until its check
// takes it out (HAProxy: within about a second), and gRPC's retries honour
// this delay instead of their growing backoff, so with 0 ms all five
// attempts reached the same replica within a millisecond (1 of 230,110
// calls lost in the container test's restart step); 200 ms spreads them over
// 800 ms, as the SDK's backoff (50 ms doubling) did.
constexpr absl::Duration kDrainRetryDelay = absl::Milliseconds(200);

// A refusal that waiting cures: when to come back, and which budget.
absl::Status Retryable(absl::Status s, absl::Duration delay, absl::string_view reason,
                       std::map<std::string, std::string> metadata) {
  return WithErrorInfo(WithRetryInfo(std::move(s), delay), reason, metadata);
}

// ErrorInfo metadata of the in-flight budget: the flag, its value, and
// what the request asked for (and, when the budget is busy, what is held).
std::map<std::string, std::string> BudgetFacts(int64_t limit, int64_t request,
                                               std::optional<int64_t> in_use = std::nullopt) {
  std::map<std::string, std::string> facts = {{"flag", "--max_inflight_bytes"},
                                              {"limit", absl::StrCat(limit)},
                                              {"request_bytes", absl::StrCat(request)}};
  if (in_use.has_value()) facts["in_use"] = absl::StrCat(*in_use);
  return facts;
}

}  // namespace

constexpr absl::string_view kShuttingDown = "server is shutting down";

absl::Status DrainingError(absl::string_view message) {
  return Retryable(absl::UnavailableError(message), kDrainRetryDelay, "DRAINING", {});
}

absl::Status AdmissionController::CheckQueue(Limit* limit) const {
  if (queued_ >= max_queue_) {
    *limit = Limit::kQueue;
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
                         "server queue is full (", queued_,
                         " requests waiting, --max_queue=", max_queue_, "); retry later")),
                     kQueueRetryDelay, "QUEUE_FULL",
                     {{"flag", "--max_queue"},
                      {"limit", absl::StrCat(max_queue_)},
                      {"in_use", absl::StrCat(queued_)}});
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckBytes(int64_t bytes, Limit* limit) const {
  // A request alone larger than the budget could never run: say so plainly.
  if (bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return WithErrorInfo(absl::ResourceExhaustedError(absl::StrCat(
                             "request needs ", bytes,
                             " bytes (request + response), more than the in-flight budget "
                             "--max_inflight_bytes=",
                             max_inflight_bytes_)),
                         "REQUEST_OVER_INFLIGHT_BUDGET", BudgetFacts(max_inflight_bytes_, bytes));
  }
  if (bytes_ + waiting_bytes_ + bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
                         "in-flight byte budget exhausted (", bytes_ + waiting_bytes_,
                         " of --max_inflight_bytes=", max_inflight_bytes_,
                         " in use or waited for, request needs ", bytes, "); retry later")),
                     kBytesRetryDelay, "INFLIGHT_BYTES_EXHAUSTED",
                     BudgetFacts(max_inflight_bytes_, bytes, bytes_ + waiting_bytes_));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckGrowth(int64_t held, int64_t bytes, int64_t ahead,
                                              Limit* limit) const {
  if (bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return WithErrorInfo(absl::ResourceExhaustedError(absl::StrCat(
                             "request needs ", bytes, " bytes, more than the in-flight budget ",
                             "--max_inflight_bytes=", max_inflight_bytes_)),
                         "REQUEST_OVER_INFLIGHT_BUDGET", BudgetFacts(max_inflight_bytes_, bytes));
  }
  // Only what is not held yet is new to the budget.
  if (bytes_ + ahead + (bytes - held) > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return Retryable(
        absl::ResourceExhaustedError(absl::StrCat(
            "in-flight byte budget exhausted (", bytes_ + ahead,
            " of --max_inflight_bytes=", max_inflight_bytes_,
            " in use or waited for, request needs ", bytes - held, " more); retry later")),
        kBytesRetryDelay, "INFLIGHT_BYTES_EXHAUSTED",
        BudgetFacts(max_inflight_bytes_, bytes - held, bytes_ + ahead));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckOpen() const {
  if (closed_) return DrainingError(kShuttingDown);
  return absl::OkStatus();
}

void AdmissionController::EndWaitersLocked(Ended* ended) {
  for (Waiter& w : waiters_) ended->emplace_back(std::move(w.done), DrainingError(kShuttingDown));
  waiters_.clear();
  waiting_bytes_ = 0;
  waiting_held_ = 0;
}

void AdmissionController::Close() {
  Ended ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    EndWaitersLocked(&ended);
  }
  RunEnded(std::move(ended));
}

AdmissionController::~AdmissionController() {
  Ended ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    EndWaitersLocked(&ended);
  }
  timer_cv_.notify_all();
  RunEnded(std::move(ended));
  if (timer_.joinable()) timer_.join();
}

void AdmissionController::WaitForBytes(AdmissionTicket* ticket, int64_t bytes, Queue queue,
                                       int64_t held, absl::Time until, absl::Status refusal,
                                       std::function<bool()> gone, WaitDone done) {
  Ended ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t growth = bytes - ticket->bytes_;
    if (closed_ || stop_) {
      ended.emplace_back(std::move(done), DrainingError(kShuttingDown));
    } else if (waiting_held_ + held > max_inflight_bytes_) {
      // The waiters would hold more than the whole budget in memory that no
      // ticket counts: no more of them.
      ended.emplace_back(std::move(done), std::move(refusal));
    } else {
      waiters_.push_back(Waiter{ticket, growth, queue, held, until, std::move(refusal),
                                std::move(gone), std::move(done)});
      waiting_bytes_ += growth;
      waiting_held_ += held;
      if (!timer_.joinable()) timer_ = std::thread([this] { TimerLoop(); });
      timer_cv_.notify_one();
      Pump(absl::Now(), &ended);  // bytes freed since the refusal
    }
  }
  RunEnded(std::move(ended));
}

template <typename Pred, typename StatusOf>
void AdmissionController::EndWaitersIf(Pred pred, Ended* ended, StatusOf status_of) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!pred(*it)) {
      ++it;
      continue;
    }
    waiting_bytes_ -= it->growth;
    waiting_held_ -= it->held;
    ended->emplace_back(std::move(it->done), status_of(*it));
    it = waiters_.erase(it);
  }
}

void AdmissionController::Pump(absl::Time now, Ended* ended) {
  // A waiter whose client left would otherwise hold its place, and the head
  // of the line, until its time (a burst's calls cut by gRPC's memory quota
  // kept the budget's waiters from it for seconds).
  EndWaitersIf([](const Waiter& w) { return w.gone && w.gone(); }, ended,
               [](Waiter&) {
                 return absl::CancelledError(
                     "the call was cancelled (client cancel, deadline or disconnect) while it "
                     "waited for the "
                     "in-flight budget");
               });
  // First come, first served: the head waits until it fits, the others
  // behind it (a big call is not starved by small ones).
  while (!waiters_.empty() && bytes_ + waiters_.front().growth <= max_inflight_bytes_) {
    Waiter& w = waiters_.front();
    const bool take_slot = w.queue == Queue::kNow;
    Limit limit;
    absl::Status s = take_slot ? CheckQueue(&limit) : absl::OkStatus();
    if (s.ok()) {
      if (take_slot) ++queued_;
      ++inflight_;
      bytes_ += w.growth;
      AdmissionTicket* t = w.ticket;
      if (t->controller_ == nullptr) *t = AdmissionTicket(this, 0, false, false);
      t->bytes_ += w.growth;
      t->queued_ = take_slot;
      t->request_ = true;
      Notify();
    }
    waiting_bytes_ -= w.growth;
    waiting_held_ -= w.held;
    ended->emplace_back(std::move(w.done), std::move(s));
    waiters_.pop_front();
  }
  EndWaitersIf([now](const Waiter& w) { return w.until <= now; }, ended,
               [](Waiter& w) { return std::move(w.refusal); });
}

void AdmissionController::RunEnded(Ended ended) {
  for (auto& [done, status] : ended) std::move(done)(std::move(status));
}

void AdmissionController::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (waiters_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    absl::Time next = absl::InfiniteFuture();
    for (const Waiter& w : waiters_) next = std::min(next, w.until);
    next = std::min(next, absl::Now() + kGonePoll);  // clients that leave
    timer_cv_.wait_until(lock, absl::ToChronoTime(next));
    Ended ended;
    Pump(absl::Now(), &ended);
    if (ended.empty()) continue;
    lock.unlock();
    RunEnded(std::move(ended));
    lock.lock();
  }
}

void AdmissionController::Notify() const {
  if (observer_) observer_(inflight_, bytes_, queued_);
}

absl::StatusOr<AdmissionTicket> AdmissionController::Admit(int64_t bytes, Queue queue,
                                                           Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  const bool take_slot = queue == Queue::kNow;
  absl::Status s = CheckOpen();
  if (s.ok() && take_slot) s = CheckQueue(limit);
  if (s.ok()) s = CheckBytes(bytes, limit);
  if (!s.ok()) return s;
  if (take_slot) ++queued_;
  ++inflight_;
  bytes_ += bytes;
  Notify();
  return AdmissionTicket(this, bytes, take_slot, /*request=*/true);
}

absl::StatusOr<AdmissionTicket> AdmissionController::Reserve(int64_t bytes, Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  absl::Status s = CheckOpen();
  if (s.ok()) s = CheckGrowth(0, bytes, waiting_bytes_, limit);
  if (!s.ok()) return s;
  bytes_ += bytes;
  Notify();
  return AdmissionTicket(this, bytes, /*queued=*/false, /*request=*/false);
}

absl::Status AdmissionController::Resize(AdmissionTicket* ticket, int64_t bytes, Limit* limit) {
  Ended ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *limit = Limit::kNone;
    if (bytes > ticket->bytes_) {
      if (absl::Status s = CheckGrowth(ticket->bytes_, bytes, 0, limit); !s.ok()) return s;
    }
    const bool shrinks = bytes < ticket->bytes_;
    bytes_ += bytes - ticket->bytes_;
    ticket->bytes_ = bytes;
    Notify();
    if (shrinks) Pump(absl::Now(), &ended);
  }
  RunEnded(std::move(ended));
  return absl::OkStatus();
}

absl::Status AdmissionController::AdmitReserved(AdmissionTicket* ticket, int64_t bytes, Queue queue,
                                                Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  const bool take_slot = queue == Queue::kNow;
  absl::Status s = CheckOpen();
  if (s.ok() && take_slot) s = CheckQueue(limit);
  if (s.ok() && bytes > ticket->bytes_) s = CheckGrowth(ticket->bytes_, bytes, 0, limit);
  if (!s.ok()) return s;
  if (take_slot) ++queued_;
  ++inflight_;
  bytes_ += bytes - ticket->bytes_;
  ticket->bytes_ = bytes;
  ticket->queued_ = take_slot;
  ticket->request_ = true;
  Notify();
  return absl::OkStatus();
}

absl::Status AdmissionController::EnterQueue(Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  absl::Status s = CheckQueue(limit);
  if (!s.ok()) return s;
  ++queued_;
  Notify();
  return absl::OkStatus();
}

void AdmissionController::LeaveQueue() {
  std::lock_guard<std::mutex> lock(mu_);
  --queued_;
  Notify();
}

void AdmissionController::Release(int64_t bytes, bool request) {
  Ended ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (request) --inflight_;
    bytes_ -= bytes;
    Notify();
    if (!waiters_.empty()) Pump(absl::Now(), &ended);
    if (inflight_ == 0) idle_.notify_all();
  }
  RunEnded(std::move(ended));
}

int64_t AdmissionController::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

int64_t AdmissionController::inflight_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inflight_;
}

int64_t AdmissionController::inflight_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t AdmissionController::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(waiters_.size());
}

bool AdmissionController::WaitIdle(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return inflight_ == 0; });
}

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    controller_ = std::exchange(other.controller_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    queued_ = std::exchange(other.queued_, false);
    request_ = std::exchange(other.request_, false);
  }
  return *this;
}

absl::Status AdmissionTicket::EnterQueue(AdmissionController::Limit* limit) {
  if (controller_ == nullptr) {
    return absl::FailedPreconditionError("EnterQueue on an empty admission ticket");
  }
  if (queued_) return absl::OkStatus();
  absl::Status s = controller_->EnterQueue(limit);
  queued_ = s.ok();
  return s;
}

void AdmissionTicket::LeaveQueue() {
  if (controller_ == nullptr || !queued_) return;
  controller_->LeaveQueue();
  queued_ = false;
}

absl::Status AdmissionTicket::Resize(int64_t bytes, AdmissionController::Limit* limit) {
  if (controller_ == nullptr) {
    return absl::FailedPreconditionError("Resize of an empty admission ticket");
  }
  return controller_->Resize(this, bytes, limit);
}

absl::Status AdmissionTicket::AdmitReserved(int64_t bytes, AdmissionController::Queue queue,
                                            AdmissionController::Limit* limit) {
  if (controller_ == nullptr || request_) {
    return absl::FailedPreconditionError("AdmitReserved needs a reservation");
  }
  return controller_->AdmitReserved(this, bytes, queue, limit);
}

void AdmissionTicket::Release() {
  if (controller_ == nullptr) return;
  LeaveQueue();
  controller_->Release(bytes_, request_);
  controller_ = nullptr;
  bytes_ = 0;
  request_ = false;
}

}  // namespace tensorops
