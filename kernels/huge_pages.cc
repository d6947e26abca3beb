#include "kernels/huge_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tensorops {

void AdviseHugePages(void* p, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < kHugePageAdviceMinBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (end > begin) {
    // Advice only: an error (e.g. THP disabled) leaves ordinary pages.
    (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

bool TuneMallocForBigBuffers() {
#if defined(__GLIBC__)
  // Measured in the server with bench/run_service_bench.sh: at 16 MiB x 8 in
  // flight, 2,500-4,500 -> 0-170 faults per call.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
  return true;
#else
  return false;
#endif
}

}  // namespace tensorops
