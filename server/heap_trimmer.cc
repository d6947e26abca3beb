#include "server/heap_trimmer.h"

#include <malloc.h>

namespace tensorops {

HeapTrimmer::HeapTrimmer(absl::Duration interval) : interval_(interval) {
  if (interval_ <= absl::ZeroDuration()) return;
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(interval_)) {
      // Holds the arena's lock while it walks the free blocks (a call that
      // allocates meanwhile waits for it).
      malloc_trim(0);
      trims_.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

HeapTrimmer::~HeapTrimmer() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

}  // namespace tensorops
