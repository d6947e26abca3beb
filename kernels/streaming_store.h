// Non-temporal (streaming) stores for outputs larger than the last-level cache.
//
// An ordinary store first reads the destination line into the cache (a read
// for ownership), so a kernel writing a DRAM-sized output moves three bytes
// over the memory bus per byte of tensor: read the input, read the output
// line, write it back. glibc's memcpy switches to non-temporal stores at such
// sizes, which write whole lines straight to memory and skip the read: two
// bytes per byte. Kernels match it by streaming their stores when the whole
// output is at least StreamingStoreMinBytes(); smaller outputs stay cached
// because the next step (encoding the reply) reads them again soon.
//
// Non-temporal stores are weakly ordered: a thread that wrote with them calls
// StreamFence() before another thread may read the result.
//
// Thread-safety: the setter is for tests and benchmarks and is atomic;
// kernels read the threshold when a plan is made, so set it before preparing
// the ops that should see it. The instruction set: kernels/kernel_isa.h.
#ifndef TENSOROPS_KERNELS_STREAMING_STORE_H_
#define TENSOROPS_KERNELS_STREAMING_STORE_H_

#include <cstdint>
#include <cstring>

#include "kernels/kernel_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorops {

// 16 MiB: from there an output and its input together fill the 32 MiB L3 of
// the machines we run on (one Zen 5 CCD; not read from sysconf, which under
// KVM reports the host's 256 MiB). Measured at 16 MiB outputs, same-binary
// A/B with the threshold at 16 vs 32 MiB: first-axis reversal 0.25-0.36x ->
// 1.1-1.3x memcpy (CPU time), row copies and batch-major ReverseSequence
// 0.8-1.0x -> 1.0-1.4x; last-axis FLOAT32 reversal 0.8x -> 0.65x.
inline constexpr int64_t kDefaultStreamingStoreMinBytes = int64_t{16} << 20;

// Outputs of at least this many bytes are written with streaming stores.
// Default kDefaultStreamingStoreMinBytes; below it an output and its input
// may still be in cache when the reply is encoded.
int64_t StreamingStoreMinBytes();
// Overrides the threshold (tests force the streaming path on small tensors
// with 0); a negative value restores the default.
void SetStreamingStoreMinBytes(int64_t bytes);

// Copies n bytes from src to dst (no overlap). With stream = true (x86-64),
// the whole 64-byte lines of dst go out with non-temporal stores of the
// active KernelIsa (kernel_isa.h) and the partial lines at the ends with ordinary stores, at
// every size, by our own loop; without, glibc's memcpy.
void CopyBytes(void* dst, const void* src, int64_t n, bool stream);

#if defined(__x86_64__)
// One 64-byte line from src (any alignment) to a 64-byte aligned dst with
// streaming stores, for loops that write whole lines and are compiled once
// per instruction set: a loop templated on the line type and instantiated
// inside a `__attribute__((target("avx2"), flatten))` function inlines the
// AVX2 stores (GCC refuses to inline a target("avx2") callee into a
// baseline template otherwise). SSE2 is baseline x86-64; ScalarLine uses no
// vector register (KernelIsa::kScalar), eight 8-byte `movnti` per line.
//
// Example:
//   template <typename Line> void Rows(char* d, const char* s, int64_t n) {
//     for (int64_t i = 0; i < n; i += 64) Line::Copy(d + i, s + i);
//   }
//   __attribute__((target("avx2"), flatten)) void RowsAvx2(...) { Rows<Avx2Line>(...); }
struct ScalarLine {
  static void Copy(char* dst, const char* src) {
    for (int q = 0; q < 64; q += 8) {
      long long v;  // NOLINT(runtime/int): the intrinsic's type
      std::memcpy(&v, src + q, 8);
      _mm_stream_si64(reinterpret_cast<long long*>(dst + q), v);  // NOLINT(runtime/int)
    }
  }
};
struct Sse2Line {
  static void Copy(char* dst, const char* src) {
    for (int q = 0; q < 64; q += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + q),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + q)));
    }
  }
};
struct Avx2Line {
  __attribute__((target("avx2"))) static void Copy(char* dst, const char* src) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32)));
  }
};

template <typename Isa>
using LineOf = ByIsa<Isa, ScalarLine, Sse2Line, Avx2Line>;

// Copies n <= 64 bytes with ordinary stores: two overlapping fixed-size
// copies, which GCC turns into a few moves. A loop here would be recognised
// as a memcpy and become a call into glibc, whose short-size path the
// streaming copies exist to avoid.
inline void SmallCopy(char* dst, const char* src, int64_t n) {
  if (n >= 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n >= 2) {
    std::memcpy(dst, src, 2);
    std::memcpy(dst + n - 2, src + n - 2, 2);
  } else if (n == 1) {
    *dst = *src;
  }
}

// CopyBytes with stream = true, inlined into a loop compiled for Line's
// instruction set: ordinary stores up to the first 64-byte boundary of dst,
// whole lines streamed, the tail ordinary. Only whole lines are streamed: a
// line that also takes an ordinary store is pulled into the cache, and a
// streaming store to a cached line costs a write-back.
template <typename Line>
inline void StreamCopyWith(char* dst, const char* src, int64_t n) {
  int64_t head = (64 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63)) & 63;
  if (head > n) head = n;
  SmallCopy(dst, src, head);
  int64_t i = head;
  for (; i + 64 <= n; i += 64) Line::Copy(dst + i, src + i);
  SmallCopy(dst + i, src + i, n - i);
}
#endif

// Orders this thread's earlier streaming stores before its later stores
// (sfence on x86); call it before publishing an output written with
// `stream` = true.
void StreamFence();

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_STREAMING_STORE_H_
