// Gives the heap's free pages back to the OS now and then (glibc's
// malloc_trim), so that the server's resident memory follows what it holds
// rather than the highest it ever held.
//
// Why: with --malloc_tuning the server serves blocks up to 32 MiB from one
// heap arena and never trims it (no page fault per 4 KiB on each large
// call). Freed blocks stay resident, and as calls of 1-16 MiB come and go
// the free space is cut into pieces that a later, larger block does not fit,
// so the heap grows past them: over a 10-minute soak its resident floor rose
// by a fifth (docs/reliability.md, "What the one-server RSS climb was").
// malloc_trim(0) returns every whole free page (inside the heap too, with
// MADV_DONTNEED), keeping the blocks and the heap's layout; a page freed and
// reused within one interval never faults again, so the cost is at most one
// fault per free page per interval.
//
// Example:
//   HeapTrimmer trimmer(absl::Seconds(10));  // trims until destroyed
//
// Thread-safety: one background thread; the destructor stops and joins it.
#ifndef TENSOROPS_SERVER_HEAP_TRIMMER_H_
#define TENSOROPS_SERVER_HEAP_TRIMMER_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tensorops {

class HeapTrimmer {
 public:
  // Trims every `interval`; an interval of zero or less starts no thread.
  explicit HeapTrimmer(absl::Duration interval);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // Trims done so far (for tests).
  int64_t trims() const { return trims_.load(std::memory_order_relaxed); }

 private:
  const absl::Duration interval_;
  absl::Notification stop_;
  std::atomic<int64_t> trims_{0};
  std::thread thread_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HEAP_TRIMMER_H_
