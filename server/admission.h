// Admission control: bounds the number of requests waiting for a kernel
// thread and the bytes (request + response) of all admitted requests, so an
// overload is answered with RESOURCE_EXHAUSTED instead of an unbounded queue
// or an out-of-memory death.
//
// Thread-safety: all methods are safe from any thread.
#ifndef TENSOROPS_SERVER_ADMISSION_H_
#define TENSOROPS_SERVER_ADMISSION_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tensorops {

class AdmissionController {
 public:
  enum class Limit { kNone, kQueue, kInflightBytes };

  AdmissionController(int64_t max_queue, int64_t max_inflight_bytes)
      : max_queue_(max_queue), max_inflight_bytes_(max_inflight_bytes) {}

  // Takes a queue slot and `bytes` of the budget, or returns RESOURCE_EXHAUSTED
  // saying which limit (and sets *limit), or UNAVAILABLE once Close()d
  // (*limit stays kNone).
  absl::Status Admit(int64_t bytes, Limit* limit);
  // For a streamed request, whose bytes arrive over time: takes `bytes` of
  // the budget (counted in flight from now on) but no queue slot yet; call
  // EnterQueue once its upload is complete, then LeaveQueue/Finish as above.
  absl::Status AdmitStream(int64_t bytes, Limit* limit);
  // Takes a queue slot for a request admitted with AdmitStream.
  absl::Status EnterQueue(Limit* limit);
  // The request left the queue (its task started).
  void LeaveQueue();
  // The request finished; gives back its bytes.
  void Finish(int64_t bytes);

  int64_t queued() const;
  int64_t inflight_requests() const;
  int64_t inflight_bytes() const;
  // The drain: from now on Admit and AdmitStream refuse with UNAVAILABLE, so
  // once WaitIdle returns true nothing is admitted any more. EnterQueue still
  // works for streams admitted before (their upload may go on).
  void Close();
  // Waits until no request is in flight, or until `deadline`. True if none is.
  bool WaitIdle(absl::Time deadline);

 private:
  // All three with mu_ held.
  absl::Status CheckOpen() const;
  absl::Status CheckQueue(Limit* limit) const;
  absl::Status CheckBytes(int64_t bytes, Limit* limit) const;

  const int64_t max_queue_;
  const int64_t max_inflight_bytes_;
  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  mutable std::mutex mu_;
  std::condition_variable idle_;  // inflight_ reached 0
  int64_t queued_ = 0;            // guarded by mu_
  int64_t inflight_ = 0;          // guarded by mu_
  int64_t bytes_ = 0;             // guarded by mu_
  bool closed_ = false;           // guarded by mu_
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_ADMISSION_H_
