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

// glibc's malloc, set for a process that moves big tensors (process-wide;
// call once, early, before threads start). glibc serves blocks above its
// mmap threshold with a fresh mmap each time and gives the top of its heaps
// back to the kernel as soon as 128 KiB-64 MiB are free there, so a process
// that receives big messages faults their pages in again on every call: in
// a client, gRPC's receive buffers (a 1 GiB streamed Roll's figures:
// BENCHMARKS.md, "The SDK's output from the buffer cache"). This
// serves blocks up to 32 MiB (glibc's cap) from the heap, keeps up to 1 GiB
// of freed memory in it, and uses one arena so buffers freed on one thread
// are reused on another (at the price of one heap lock for every thread).
// tensorops-server does it unless --malloc_tuning=false; the SDK offers it
// to its callers (tensorops::TuneMallocForBigTensors). False where it is
// not glibc (nothing done).
bool TuneMallocForBigBuffers();

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_HUGE_PAGES_H_
