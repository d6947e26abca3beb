// Transparent huge pages for big tensor buffers.
//
// A fresh buffer costs a page fault per 4 KiB page on first touch (about
// 2 us each on this kind of VM: more than copying the page). Where the kernel
// runs THP in "madvise" mode (Debian's default), MADV_HUGEPAGE on a buffer
// that has not been touched yet makes those faults one per 2 MiB.
//
// Thread-safety: a pure function of its arguments.
#ifndef TENSOROPS_KERNELS_HUGE_PAGES_H_
#define TENSOROPS_KERNELS_HUGE_PAGES_H_

#include <cstdint>

namespace tensorops {

// Buffers smaller than this are left alone (most of them come from the
// heap's already-mapped pages anyway).
inline constexpr int64_t kHugePageAdviceMinBytes = int64_t{8} << 20;

// Advises huge pages for the whole 2 MiB pages inside [p, p + bytes); a
// no-op below kHugePageAdviceMinBytes, off Linux, or if the kernel refuses.
void AdviseHugePages(void* p, int64_t bytes);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_HUGE_PAGES_H_
