#include "server/admission.h"

#include "absl/strings/str_cat.h"

namespace tensorops {

absl::Status AdmissionController::CheckQueue(Limit* limit) const {
  if (queued_ >= max_queue_) {
    *limit = Limit::kQueue;
    return absl::ResourceExhaustedError(absl::StrCat(
        "server queue is full (", queued_, " requests waiting, --max_queue=", max_queue_,
        "); retry later"));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckBytes(int64_t bytes, Limit* limit) const {
  // A request alone larger than the budget could never run: say so plainly.
  if (bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return absl::ResourceExhaustedError(absl::StrCat(
        "request needs ", bytes, " bytes (request + response), more than the in-flight budget "
        "--max_inflight_bytes=", max_inflight_bytes_));
  }
  if (bytes_ + bytes > max_inflight_bytes_) {
    *limit = Limit::kInflightBytes;
    return absl::ResourceExhaustedError(absl::StrCat(
        "in-flight byte budget exhausted (", bytes_, " of --max_inflight_bytes=",
        max_inflight_bytes_, " in use, request needs ", bytes, "); retry later"));
  }
  return absl::OkStatus();
}

absl::Status AdmissionController::CheckOpen() const {
  if (closed_) return absl::UnavailableError("server is shutting down");
  return absl::OkStatus();
}

void AdmissionController::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

absl::Status AdmissionController::Admit(int64_t bytes, Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  absl::Status s = CheckOpen();
  if (s.ok()) s = CheckQueue(limit);
  if (s.ok()) s = CheckBytes(bytes, limit);
  if (!s.ok()) return s;
  ++queued_;
  ++inflight_;
  bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status AdmissionController::AdmitStream(int64_t bytes, Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  absl::Status s = CheckOpen();
  if (s.ok()) s = CheckBytes(bytes, limit);
  if (!s.ok()) return s;
  ++inflight_;
  bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status AdmissionController::EnterQueue(Limit* limit) {
  std::lock_guard<std::mutex> lock(mu_);
  *limit = Limit::kNone;
  absl::Status s = CheckQueue(limit);
  if (!s.ok()) return s;
  ++queued_;
  return absl::OkStatus();
}

void AdmissionController::LeaveQueue() {
  std::lock_guard<std::mutex> lock(mu_);
  --queued_;
}

void AdmissionController::Finish(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  --inflight_;
  bytes_ -= bytes;
  if (inflight_ == 0) idle_.notify_all();
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

}  // namespace tensorops
