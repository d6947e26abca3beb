#include "server/core/admission.h"

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
  if (bytes_ + bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
                         "in-flight byte budget exhausted (", bytes_, " of --max_inflight_bytes=",
                         max_inflight_bytes_, " in use, request needs ", bytes, "); retry later")),
                     kBytesRetryDelay, "INFLIGHT_BYTES_EXHAUSTED",
                     BudgetFacts(max_inflight_bytes_, bytes, bytes_));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckGrowth(int64_t held, int64_t bytes, Limit* limit) const {
  if (bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return WithErrorInfo(absl::ResourceExhaustedError(absl::StrCat(
                             "request needs ", bytes, " bytes, more than the in-flight budget ",
                             "--max_inflight_bytes=", max_inflight_bytes_)),
                         "REQUEST_OVER_INFLIGHT_BUDGET", BudgetFacts(max_inflight_bytes_, bytes));
  }
  // Only what is not held yet is new to the budget.
  if (bytes_ + (bytes - held) > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
                         "in-flight byte budget exhausted (", bytes_,
                         " of --max_inflight_bytes=", max_inflight_bytes_,
                         " in use, request needs ", bytes - held, " more); retry later")),
                     kBytesRetryDelay, "INFLIGHT_BYTES_EXHAUSTED",
                     BudgetFacts(max_inflight_bytes_, bytes - held, bytes_));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckOpen() const {
  if (closed_) return DrainingError("server is shutting down");
  return absl::OkStatus();
}

void AdmissionController::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
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
  if (s.ok()) s = CheckGrowth(0, bytes, limit);
  if (!s.ok()) return s;
  bytes_ += bytes;
  Notify();
  return AdmissionTicket(this, bytes, /*queued=*/false, /*request=*/false);
}

absl::Status AdmissionController::Resize(AdmissionTicket* ticket, int64_t bytes, Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  if (bytes > ticket->bytes_) {
    if (absl::Status s = CheckGrowth(ticket->bytes_, bytes, limit); !s.ok()) return s;
  }
  bytes_ += bytes - ticket->bytes_;
  ticket->bytes_ = bytes;
  Notify();
  return absl::OkStatus();
}

absl::Status AdmissionController::AdmitReserved(AdmissionTicket* ticket, int64_t bytes, Queue queue,
                                                Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  const bool take_slot = queue == Queue::kNow;
  absl::Status s = CheckOpen();
  if (s.ok() && take_slot) s = CheckQueue(limit);
  if (s.ok() && bytes > ticket->bytes_) s = CheckGrowth(ticket->bytes_, bytes, limit);
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
  std::lock_guard<std::mutex> lock(mu_);
  if (request) --inflight_;
  bytes_ -= bytes;
  Notify();
  if (request && inflight_ == 0) idle_.notify_all();
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
