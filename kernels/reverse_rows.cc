#include "kernels/reverse_rows.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/kernel_isa.h"
#include "kernels/lane_reverse.h"
#include "kernels/streaming_store.h"

namespace tensorops {
namespace {

// `rows` rows of n blocks; row r reads src + r*src_step and writes
// dst + r*dst_step (ReverseRows' arguments).
struct RowArgs {
  char* dst;
  const char* src;
  int64_t n, rows, dst_step, src_step;
};

#if defined(__x86_64__)
// One row of n elements reversed into an output past the cache: the output
// is walked ascending so that the stores can be aligned streaming stores (the
// loads are unaligned and descend instead). Only whole 64-byte lines are
// streamed (see StreamCopyWith); the partial lines at either end take
// ordinary stores. Needs dst aligned to kWidth, so that line boundaries are
// element boundaries.
template <typename Rev, int kWidth>
inline void ReverseOneStream(char* dst, const char* src, int64_t n) {
  const int64_t total = n * kWidth;
  const auto addr = reinterpret_cast<uintptr_t>(dst);
  if ((addr & (kWidth - 1)) != 0) {
    Rev::template ReverseShort<kWidth>(dst, src, n);
    return;
  }
  const int64_t q0 = static_cast<int64_t>((64 - (addr & 63)) & 63);                   // first line
  const int64_t q1 = static_cast<int64_t>(((addr + total) & ~uintptr_t{63}) - addr);  // past last
  if (q1 < q0 + 64) {  // no whole line inside
    Rev::template ReverseShort<kWidth>(dst, src, n);
    return;
  }
  // dst elements [0, q0/w) <- src elements [n - q0/w, n), reversed.
  Rev::template ReverseShort<kWidth>(dst, src + total - q0, q0 / kWidth);
  for (int64_t q = q0; q < q1; q += 64) {
    Rev::template Reverse<kWidth>(dst + q, src + total - q - 64);
  }
  // dst elements [q1/w, n) <- src elements [0, n - q1/w), reversed.
  Rev::template ReverseShort<kWidth>(dst + q1, src, (total - q1) / kWidth);
}

// `rows` rows of n elements each; row r reads src + r*src_step and writes
// dst + r*dst_step. One call per batch of rows: a row of 256 one-byte
// elements moves in ~10 ns, so a call and a dispatch per row would cost as
// much as the row itself.
//
// Short rows are prefetched whole, kPrefetchRowsAhead rows ahead: inside a
// row the streaming path reads descending, which the hardware prefetcher does
// not follow, and a row of 256 B-2 KiB is over before it would pick up the
// pattern across rows (measured on 256 MiB, rows of 256 B-2 KiB: 0.55-0.82x
// memcpy without, 1.45-1.73x with; ../shared/perf-notes.md).
constexpr int64_t kPrefetchRowsAhead = 2;
constexpr int64_t kPrefetchMaxRowBytes = 4096;

inline void PrefetchRow(const char* p, int64_t bytes) {
  for (int64_t k = 0; k < bytes; k += 64) __builtin_prefetch(p + k);
}

// Rows that are whole lines of a 64-byte aligned output (the server's big
// outputs are page-aligned, and rows of 64-byte multiples are the common
// case): no partial lines, so no per-row set-up (ReverseOneStream's bounds
// and its two empty edge calls were ~70 of the ~120 instructions of a
// 256-byte row, next to ~50 for its four lines), and the prefetch of the row
// kPrefetchRowsAhead ahead is one instruction per line inside the same loop.
// Short rows at DRAM speed leave an Intel core ~60 cycles per 256-byte row,
// so the set-up mattered there (issue 44: last-axis reversal 0.71-0.80x).
template <typename Rev, int kWidth>
inline void ReverseWholeLineRows(const RowArgs& a) {
  const int64_t row_bytes = a.n * kWidth;
  const int64_t rows = a.rows, dst_step = a.dst_step, src_step = a.src_step;
  const bool prefetch = rows > kPrefetchRowsAhead && row_bytes <= kPrefetchMaxRowBytes;
  // Rows [0, prefetched) prefetch their successor kPrefetchRowsAhead ahead.
  const int64_t prefetched = prefetch ? rows - kPrefetchRowsAhead : 0;
  const int64_t ahead = kPrefetchRowsAhead * src_step;
  char* dst = a.dst;
  const char* src = a.src;
  int64_t r = 0;
  for (; r < prefetched; ++r, dst += dst_step, src += src_step) {
    const char* s = src + row_bytes - 64;
    for (int64_t q = 0; q < row_bytes; q += 64, s -= 64) {
      __builtin_prefetch(s + ahead);
      Rev::template Reverse<kWidth>(dst + q, s);
    }
  }
  for (; r < rows; ++r, dst += dst_step, src += src_step) {
    const char* s = src + row_bytes - 64;
    for (int64_t q = 0; q < row_bytes; q += 64, s -= 64) Rev::template Reverse<kWidth>(dst + q, s);
  }
}

template <typename Rev, int kWidth>
inline void ReverseRowsStreamWith(const RowArgs& a) {
  const int64_t row_bytes = a.n * kWidth;
  if (row_bytes > 0 && row_bytes % 64 == 0 && reinterpret_cast<uintptr_t>(a.dst) % 64 == 0 &&
      a.dst_step % 64 == 0) {
    ReverseWholeLineRows<Rev, kWidth>(a);
    return;
  }
  const bool prefetch = a.rows > kPrefetchRowsAhead && row_bytes <= kPrefetchMaxRowBytes;
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
    if (prefetch && r + kPrefetchRowsAhead < a.rows) {
      PrefetchRow(src + kPrefetchRowsAhead * a.src_step, row_bytes);
    }
    ReverseOneStream<Rev, kWidth>(dst, src, a.n);
  }
}

// Rows of kWidth-byte elements into an output past the cache, one variant
// per ISA tag (IsaDispatch).
template <int kWidth>
struct ReverseRowsStream {
  template <typename Isa>
  static void Run(RowArgs a) {
    ReverseRowsStreamWith<RevOf<Isa>, kWidth>(a);
  }
};

// Rows with ordinary stores (outputs that stay in cache): AVX2 lanes, else
// the typed scalar loop (GCC vectorises nothing that reads backwards, and
// SSE2's byte reversal is no faster than it on rows that are in cache).
template <int kWidth>
struct ReverseRowsCached {
  template <typename Isa>
  static void Run(RowArgs a) {
    const int64_t row_bytes = a.n * kWidth;
    const bool prefetch = a.rows > kPrefetchRowsAhead && row_bytes <= kPrefetchMaxRowBytes;
    char* dst = a.dst;
    const char* src = a.src;
    for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
      if constexpr (std::is_same_v<Isa, Avx2Isa>) {
        if (prefetch && r + kPrefetchRowsAhead < a.rows) {
          PrefetchRow(src + kPrefetchRowsAhead * a.src_step, row_bytes);
        }
        ReverseOneAvx2<kWidth>(dst, src, a.n);
      } else {
        (void)prefetch;
        ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, a.n);
      }
    }
  }
};

// Blocks of any other width reversed into an output past the cache, each
// block copied by StreamCopyWith inline (a call per 256-byte block, and
// glibc's short-size memcpy behind it, cost up to half the speed).
struct ReverseBlocksStream {
  template <typename Isa>
  static void Run(RowArgs a, int64_t block) {
    char* dst = a.dst;
    const char* src = a.src;
    for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
      // Read ascending, write descending: ascending reads keep the hardware
      // prefetcher streaming from DRAM.
      for (int64_t i = 0; i < a.n; ++i) {
        StreamCopyWith<LineOf<Isa>>(dst + (a.n - 1 - i) * block, src + i * block, block);
      }
    }
  }
};

#endif

// Rows of 1/2/4/8/16-byte elements on the active instruction set.
template <int kWidth>
void ReverseRowsOf(const RowArgs& a, bool stream) {
#if defined(__x86_64__)
  if (stream) {
    IsaDispatch<ReverseRowsStream<kWidth>>::Run(a);
  } else {
    IsaDispatch<ReverseRowsCached<kWidth>>::Run(a);
  }
#else
  (void)stream;
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, a.n);
  }
#endif
}

}  // namespace

void ReverseRows(void* dst_v, const void* src_v, int64_t n, int64_t block, int64_t rows,
                 int64_t dst_step, int64_t src_step, bool stream) {
  const RowArgs a{
      static_cast<char*>(dst_v), static_cast<const char*>(src_v), n, rows, dst_step, src_step};
  if (WithLaneWidth(block, [&](auto w) { ReverseRowsOf<decltype(w)::value>(a, stream); })) {
    return;
  }
#if defined(__x86_64__)
  if (stream) {
    IsaDispatch<ReverseBlocksStream>::Run(a, block);
    return;
  }
#endif
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < rows; ++r, dst += dst_step, src += src_step) {
    // Read ascending, write descending: ascending reads keep the
    // hardware prefetcher streaming from DRAM.
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + (n - 1 - i) * block, src + i * block, block);
  }
}

void ReverseBlocks(void* dst, const void* src, int64_t n, int64_t block, bool stream) {
  ReverseRows(dst, src, n, block, 1, 0, 0, stream);
}

}  // namespace tensorops
