#include "kernels/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/streaming_store.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorops {
namespace {

// Largest row the innermost-roll path assembles on the stack (L1 is 32-48 KiB).
constexpr int64_t kRollScratchBytes = 8192;

struct Bytes16 {
  uint64_t lo, hi;
};

template <typename T>
void ReverseScalar(char* dst, const char* src, int64_t n) {
  // memcpy-based loads/stores: buffers (e.g. a proto's raw_data) need not be
  // aligned for T; GCC turns these into plain moves.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + (n - 1 - i) * sizeof(T), sizeof(T));
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

template <int kWidth>
struct ScalarOf;
template <>
struct ScalarOf<1> {
  using type = uint8_t;
};
template <>
struct ScalarOf<2> {
  using type = uint16_t;
};
template <>
struct ScalarOf<4> {
  using type = uint32_t;
};
template <>
struct ScalarOf<8> {
  using type = uint64_t;
};
template <>
struct ScalarOf<16> {
  using type = Bytes16;
};

// `rows` rows of n blocks; row r reads src + r*src_step and writes
// dst + r*dst_step (ReverseRows' arguments).
struct RowArgs {
  char* dst;
  const char* src;
  int64_t n, rows, dst_step, src_step;
};

#if defined(__x86_64__)
// GCC 12 does not vectorise a loop that reads backwards, so the reversal of
// 1/2/4/8/16-byte elements is written per instruction set (KernelIsa): AVX2
// lane shuffles, SSE2 word shuffles, or 8-byte words in general registers.
// Each step loads from the end of the row, reverses the lanes, stores them at
// the front.
__attribute__((target("avx2"))) inline __m256i ReverseLanes(__m256i v, int width) {
  switch (width) {
    case 1: {
      const __m256i in_lane =
          _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11,
                           10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
      return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, in_lane), 0x4E);
    }
    case 2: {
      const __m256i in_lane =
          _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10,
                           11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1);
      return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, in_lane), 0x4E);
    }
    case 4:
      return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
    case 8:
      return _mm256_permute4x64_epi64(v, 0x1B);
    default:  // 16
      return _mm256_permute4x64_epi64(v, 0x4E);
  }
}

template <int kWidth>
__attribute__((target("avx2"), always_inline)) inline void ReverseOneAvx2(char* dst,
                                                                          const char* src,
                                                                          int64_t n) {
  constexpr int64_t kLanes = 32 / kWidth;
  if (n < kLanes) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, n);
    return;
  }
  // Read ascending (the prefetcher streams it), write descending.
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * kWidth));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (i + kLanes) * kWidth));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - kLanes) * kWidth),
                        ReverseLanes(a, kWidth));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - 2 * kLanes) * kWidth),
                        ReverseLanes(b, kWidth));
  }
  if (i + kLanes <= n) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * kWidth));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - kLanes) * kWidth),
                        ReverseLanes(a, kWidth));
    i += kLanes;
  }
  if (i < n) {
    // Tail: dst[0, n-i) still needs src[i, n). The last full vector of src,
    // reversed, is dst[0, kLanes): it covers the tail and rewrites the few
    // elements after it with the values they already have (out of place, so
    // no overlap with src).
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (n - kLanes) * kWidth));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), ReverseLanes(a, kWidth));
  }
}

// One 64-byte line with its elements reversed, per instruction set:
// Reverse<W>(dst, src) writes dst[0, 64) (64-byte aligned) with streaming
// stores as the W-byte elements of src[0, 64) in reverse order;
// ReverseShort<W> reverses n elements with ordinary stores (the partial lines
// at the ends of a row).
struct Avx2Rev {
  template <int kWidth>
  __attribute__((target("avx2"))) static void Reverse(char* dst, const char* src) {
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), ReverseLanes(hi, kWidth));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), ReverseLanes(lo, kWidth));
  }
  template <int kWidth>
  __attribute__((target("avx2"))) static void ReverseShort(char* dst, const char* src, int64_t n) {
    ReverseOneAvx2<kWidth>(dst, src, n);
  }
};

// SSE2 has no byte shuffle: dwords are reversed with pshufd, words inside
// them with pshuflw/pshufhw, bytes inside words with shifts.
struct Sse2Rev {
  template <int kWidth>
  static __m128i Reverse16(__m128i v) {
    if constexpr (kWidth == 16) {
      return v;
    } else if constexpr (kWidth == 8) {
      return _mm_shuffle_epi32(v, 0x4E);
    } else if constexpr (kWidth == 4) {
      return _mm_shuffle_epi32(v, 0x1B);
    } else {
      v = _mm_shuffle_epi32(v, 0x1B);
      v = _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, 0xB1), 0xB1);
      if constexpr (kWidth == 1) v = _mm_or_si128(_mm_slli_epi16(v, 8), _mm_srli_epi16(v, 8));
      return v;
    }
  }
  template <int kWidth>
  static void Reverse(char* dst, const char* src) {
    for (int q = 0; q < 64; q += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48 - q));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + q), Reverse16<kWidth>(v));
    }
  }
  template <int kWidth>
  static void ReverseShort(char* dst, const char* src, int64_t n) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, n);
  }
};

// General-purpose registers only: 8-byte words, their elements reversed by a
// byte swap or rotations, written with movnti.
struct ScalarRev {
  template <int kWidth>
  static uint64_t Reverse8(uint64_t x) {
    if constexpr (kWidth == 1) {
      return __builtin_bswap64(x);
    } else if constexpr (kWidth == 2) {
      x = ((x & 0x0000FFFF0000FFFFull) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFull);
      return (x << 32) | (x >> 32);
    } else if constexpr (kWidth == 4) {
      return (x << 32) | (x >> 32);
    } else {
      return x;  // 8, 16: whole words move
    }
  }
  template <int kWidth>
  static void Reverse(char* dst, const char* src) {
    for (int k = 0; k < 8; ++k) {
      // Word k of dst is word 7-k of src; for 16-byte elements the two words
      // of an element keep their order.
      const int from = kWidth == 16 ? (7 - k) ^ 1 : 7 - k;
      uint64_t v;
      std::memcpy(&v, src + 8 * from, 8);
      _mm_stream_si64(reinterpret_cast<long long*>(dst + 8 * k),     // NOLINT(runtime/int)
                      static_cast<long long>(Reverse8<kWidth>(v)));  // NOLINT(runtime/int)
    }
  }
  template <int kWidth>
  static void ReverseShort(char* dst, const char* src, int64_t n) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, n);
  }
};

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

template <typename Rev, int kWidth>
inline void ReverseRowsStreamWith(const RowArgs& a) {
  const int64_t row_bytes = a.n * kWidth;
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

template <int kWidth>
__attribute__((target("avx2"), flatten)) void ReverseRowsStreamAvx2(const RowArgs& a) {
  ReverseRowsStreamWith<Avx2Rev, kWidth>(a);
}
template <int kWidth>
__attribute__((flatten)) void ReverseRowsStreamSse2(const RowArgs& a) {
  ReverseRowsStreamWith<Sse2Rev, kWidth>(a);
}
template <int kWidth>
__attribute__((flatten)) void ReverseRowsStreamScalar(const RowArgs& a) {
  ReverseRowsStreamWith<ScalarRev, kWidth>(a);
}

// Ordinary stores (outputs that stay in cache), AVX2.
template <int kWidth>
__attribute__((target("avx2"))) void ReverseRowsAvx2(const RowArgs& a) {
  const int64_t row_bytes = a.n * kWidth;
  const bool prefetch = a.rows > kPrefetchRowsAhead && row_bytes <= kPrefetchMaxRowBytes;
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
    if (prefetch && r + kPrefetchRowsAhead < a.rows) {
      PrefetchRow(src + kPrefetchRowsAhead * a.src_step, row_bytes);
    }
    ReverseOneAvx2<kWidth>(dst, src, a.n);
  }
}

// Blocks of any other width reversed into an output past the cache, each
// block copied by StreamCopyWith inline (a call per 256-byte block, and
// glibc's short-size memcpy behind it, cost up to half the speed).
template <typename Line>
inline void ReverseBlocksStreamWith(const RowArgs& a, int64_t block) {
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
    // Read ascending, write descending: ascending reads keep the hardware
    // prefetcher streaming from DRAM.
    for (int64_t i = 0; i < a.n; ++i) {
      StreamCopyWith<Line>(dst + (a.n - 1 - i) * block, src + i * block, block);
    }
  }
}

__attribute__((target("avx2"), flatten)) void ReverseBlocksStreamAvx2(const RowArgs& a,
                                                                      int64_t block) {
  ReverseBlocksStreamWith<Avx2Line>(a, block);
}
__attribute__((flatten)) void ReverseBlocksStreamSse2(const RowArgs& a, int64_t block) {
  ReverseBlocksStreamWith<Sse2Line>(a, block);
}
__attribute__((flatten)) void ReverseBlocksStreamScalar(const RowArgs& a, int64_t block) {
  ReverseBlocksStreamWith<ScalarLine>(a, block);
}
#endif

// Rows of 1/2/4/8/16-byte elements on the active instruction set. Outputs in
// cache take ordinary stores: AVX2 lanes, else the scalar loop.
template <int kWidth>
void ReverseRowsOf(const RowArgs& a, bool stream) {
#if defined(__x86_64__)
  const KernelIsa isa = ActiveKernelIsa();
  if (stream) {
    switch (isa) {
      case KernelIsa::kAvx2:
        ReverseRowsStreamAvx2<kWidth>(a);
        return;
      case KernelIsa::kSse2:
        ReverseRowsStreamSse2<kWidth>(a);
        return;
      case KernelIsa::kScalar:
        ReverseRowsStreamScalar<kWidth>(a);
        return;
    }
  }
  if (isa == KernelIsa::kAvx2) {
    ReverseRowsAvx2<kWidth>(a);
    return;
  }
#endif
  (void)stream;
  char* dst = a.dst;
  const char* src = a.src;
  for (int64_t r = 0; r < a.rows; ++r, dst += a.dst_step, src += a.src_step) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, a.n);
  }
}

// Rows rolled along their own bytes, streamed straight to a 64-byte aligned
// output: out[j] = in[(j + off) mod row] for rows of `row` bytes (a multiple
// of 64), `count` rows stepping in_step / out_step. Each output line is one
// unaligned load of the source at its rolled offset; the one line per row
// that straddles the wrap is assembled in a 64-byte buffer. Streaming stores
// of whole lines only, the copies inline (a call per 256-byte row was a third
// of the time at 256 MiB), the next rows prefetched (the row's reads start
// mid-row, which the hardware prefetcher learns late).
struct RolledRows {
  char* out;
  const char* in;
  int64_t row, off, count, out_step, in_step;
};

#if defined(__x86_64__)
template <typename Line>
void StreamRolledRowsWith(const RolledRows& r) {
  alignas(64) char wrap[64];
  const char* in = r.in;
  char* out = r.out;
  for (int64_t k = 0; k < r.count; ++k, in += r.in_step, out += r.out_step) {
    if (k + 2 < r.count) {
      for (int64_t b = 0; b < r.row; b += 64) _mm_prefetch(in + 2 * r.in_step + b, _MM_HINT_T0);
    }
    int64_t s = r.off;
    for (int64_t j = 0; j < r.row; j += 64, s += 64) {
      if (s >= r.row) s -= r.row;
      const char* src = in + s;
      if (s + 64 > r.row) {
        SmallCopy(wrap, in + s, r.row - s);
        SmallCopy(wrap + (r.row - s), in, 64 - (r.row - s));
        src = wrap;
      }
      Line::Copy(out + j, src);
    }
  }
}

__attribute__((target("avx2"), flatten)) void StreamRolledRowsAvx2(const RolledRows& r) {
  StreamRolledRowsWith<Avx2Line>(r);
}
__attribute__((flatten)) void StreamRolledRowsSse2(const RolledRows& r) {
  StreamRolledRowsWith<Sse2Line>(r);
}
__attribute__((flatten)) void StreamRolledRowsScalar(const RolledRows& r) {
  StreamRolledRowsWith<ScalarLine>(r);
}

void StreamRolledRows(const RolledRows& r) {
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx2:
      StreamRolledRowsAvx2(r);
      return;
    case KernelIsa::kSse2:
      StreamRolledRowsSse2(r);
      return;
    case KernelIsa::kScalar:
      StreamRolledRowsScalar(r);
      return;
  }
}

// Rows reversed and rolled along their own elements (what a chain of
// Reverses and Rolls composes to along an axis), streamed straight to a
// 64-byte aligned output: out element e = in element (c - e) mod n for rows
// of `row` bytes (a multiple of 64), `off` = (c + 1) * width. Output line j
// holds, reversed, the 64 input bytes of the circular range that ends at
// byte off - j: one unaligned load and a lane reversal per line, the one
// line per row that straddles the wrap assembled in a 64-byte buffer. Every
// output line is one streaming store of a whole line; written as its two
// reversed runs instead, the line where they meet took ordinary stores from
// both.
template <typename Rev, int kWidth>
void StreamReverseRolledRowsWith(const RolledRows& r) {
  alignas(64) char wrap[64];
  const char* in = r.in;
  char* out = r.out;
  for (int64_t k = 0; k < r.count; ++k, in += r.in_step, out += r.out_step) {
    if (k + 2 < r.count) {
      for (int64_t b = 0; b < r.row; b += 64) _mm_prefetch(in + 2 * r.in_step + b, _MM_HINT_T0);
    }
    int64_t s = r.off - 64;  // off is in (0, row]
    if (s < 0) s += r.row;
    for (int64_t j = 0; j < r.row; j += 64) {
      const char* src = in + s;
      if (s + 64 > r.row) {
        SmallCopy(wrap, in + s, r.row - s);
        SmallCopy(wrap + (r.row - s), in, 64 - (r.row - s));
        src = wrap;
      }
      Rev::template Reverse<kWidth>(out + j, src);
      s -= 64;
      if (s < 0) s += r.row;
    }
  }
}

template <int kWidth>
__attribute__((target("avx2"), flatten)) void StreamReverseRolledRowsAvx2(const RolledRows& r) {
  StreamReverseRolledRowsWith<Avx2Rev, kWidth>(r);
}
template <int kWidth>
__attribute__((flatten)) void StreamReverseRolledRowsSse2(const RolledRows& r) {
  StreamReverseRolledRowsWith<Sse2Rev, kWidth>(r);
}
template <int kWidth>
__attribute__((flatten)) void StreamReverseRolledRowsScalar(const RolledRows& r) {
  StreamReverseRolledRowsWith<ScalarRev, kWidth>(r);
}

template <int kWidth>
void StreamReverseRolledRowsOf(const RolledRows& r) {
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx2:
      StreamReverseRolledRowsAvx2<kWidth>(r);
      return;
    case KernelIsa::kSse2:
      StreamReverseRolledRowsSse2<kWidth>(r);
      return;
    case KernelIsa::kScalar:
      StreamReverseRolledRowsScalar<kWidth>(r);
      return;
  }
}

// False for an element width without a lane reversal.
bool StreamReverseRolledRows(const RolledRows& r, int64_t width) {
  switch (width) {
    case 1:
      StreamReverseRolledRowsOf<1>(r);
      return true;
    case 2:
      StreamReverseRolledRowsOf<2>(r);
      return true;
    case 4:
      StreamReverseRolledRowsOf<4>(r);
      return true;
    case 8:
      StreamReverseRolledRowsOf<8>(r);
      return true;
    case 16:
      StreamReverseRolledRowsOf<16>(r);
      return true;
    default:
      return false;
  }
}

// Blocks of a width without a lane reversal, streamed.
void ReverseBlocksStream(const RowArgs& a, int64_t block) {
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx2:
      ReverseBlocksStreamAvx2(a, block);
      return;
    case KernelIsa::kSse2:
      ReverseBlocksStreamSse2(a, block);
      return;
    case KernelIsa::kScalar:
      ReverseBlocksStreamScalar(a, block);
      return;
  }
}
#endif

}  // namespace

void ReverseRows(void* dst_v, const void* src_v, int64_t n, int64_t block, int64_t rows,
                 int64_t dst_step, int64_t src_step, bool stream) {
  const RowArgs a{
      static_cast<char*>(dst_v), static_cast<const char*>(src_v), n, rows, dst_step, src_step};
  switch (block) {
    case 1:
      ReverseRowsOf<1>(a, stream);
      return;
    case 2:
      ReverseRowsOf<2>(a, stream);
      return;
    case 4:
      ReverseRowsOf<4>(a, stream);
      return;
    case 8:
      ReverseRowsOf<8>(a, stream);
      return;
    case 16:
      ReverseRowsOf<16>(a, stream);
      return;
    default:
#if defined(__x86_64__)
      if (stream) {
        ReverseBlocksStream(a, block);
        return;
      }
#endif
      char* dst = a.dst;
      const char* src = a.src;
      for (int64_t r = 0; r < rows; ++r, dst += dst_step, src += src_step) {
        // Read ascending, write descending: ascending reads keep the
        // hardware prefetcher streaming from DRAM.
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(dst + (n - 1 - i) * block, src + i * block, block);
      }
  }
}

void ReverseBlocks(void* dst, const void* src, int64_t n, int64_t block, bool stream) {
  ReverseRows(dst, src, n, block, 1, 0, 0, stream);
}

AxisTransformPlan::AxisTransformPlan(const Shape& shape, int64_t elem_width,
                                     absl::Span<const DimTransform> per_dim)
    : AxisTransformPlan(shape, elem_width, per_dim, /*stream=*/false) {
  if (!empty_) stream_ = NumElements(shape) * elem_width >= StreamingStoreMinBytes();
}

AxisTransformPlan::AxisTransformPlan(const Shape& shape, int64_t elem_width,
                                     absl::Span<const DimTransform> per_dim, bool stream) {
  using Kind = DimTransform::Kind;
  for (int64_t d : shape) {
    if (d == 0) empty_ = true;
  }
  // Nothing to move; and with a zero dim the other dims may be huge, so
  // their products (strides below) could overflow.
  if (empty_) return;
  // 1. Drop size-1 dims (every transform is the identity on them) and rolls by 0.
  struct Simple {
    int64_t size;
    DimTransform t;
  };
  absl::InlinedVector<Simple, 6> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    DimTransform t = per_dim[i];
    if (t.kind == Kind::kRoll && t.shift == 0) t = DimTransform::Copy();
    if (t.kind == Kind::kReverseRoll && t.shift == shape[i] - 1) t = DimTransform::Reverse();
    // 2. Merge neighbours: copy+copy is a copy; reverse+reverse is a reverse
    //    of the flattened dim (index i*n2+j maps to (n1-1-i)*n2 + (n2-1-j)).
    if (!dims.empty() && t.kind == dims.back().t.kind &&
        (t.kind == Kind::kCopy || t.kind == Kind::kReverse)) {
      dims.back().size *= shape[i];
    } else {
      dims.push_back({shape[i], t});
    }
  }
  // 3. Fold untouched trailing dims into the contiguous block.
  block_ = elem_width;
  while (!dims.empty() && dims.back().t.kind == Kind::kCopy) {
    block_ *= dims.back().size;
    dims.pop_back();
  }
  // Byte strides, innermost first; `stride` ends as the tensor's bytes.
  dims_.resize(dims.size());
  int64_t stride = block_;
  for (size_t i = dims.size(); i-- > 0;) {
    Dim& out = dims_[i];
    const int64_t n = dims[i].size;
    out.size = n;
    out.stride = stride;
    stride *= n;
    switch (dims[i].t.kind) {
      case Kind::kCopy:
        out.segments.push_back({0, 0, n, false});
        break;
      case Kind::kReverse:
        out.segments.push_back({0, n - 1, n, true});
        break;
      case Kind::kRoll: {
        // out[j] = in[(j - s) mod n]: out[0, s) <- in[n-s, n); out[s, n) <- in[0, n-s).
        const int64_t s = dims[i].t.shift;
        out.segments.push_back({0, n - s, s, false});
        out.segments.push_back({s, 0, n - s, false});
        break;
      }
      case Kind::kReverseRoll: {
        // out[j] = in[(c - j) mod n]: out[0, c] <- in[c..0]; out(c, n) <- in[n-1..c+1].
        const int64_t c = dims[i].t.shift;
        out.segments.push_back({0, c, c + 1, true});
        if (c + 1 < n) out.segments.push_back({c + 1, n - 1, n - 1 - c, true});
        break;
      }
    }
  }
  stream_ = stream;
}

void AxisTransformPlan::Recurse(size_t d, const char* in, char* out) const {
  const Dim& dim = dims_[d];
  if (d + 1 == dims_.size()) {
    // Innermost: the dim's stride is the block, so forward segments are one memcpy.
    for (const Segment& s : dim.segments) {
      if (s.reversed) {
        ReverseBlocks(out + s.out_start * block_, in + (s.in_start - s.count + 1) * block_, s.count,
                      block_, stream_);
      } else {
        CopyBytes(out + s.out_start * block_, in + s.in_start * block_, s.count * block_, stream_);
      }
    }
    return;
  }
  for (const Segment& s : dim.segments) {
    const int64_t in_step = s.reversed ? -dim.stride : dim.stride;
    Rows(d, in + s.in_start * dim.stride, in_step, out + s.out_start * dim.stride, dim.stride,
         s.count);
  }
}

void AxisTransformPlan::Rows(size_t d, const char* in, int64_t in_step, char* out, int64_t out_step,
                             int64_t count) const {
  if (in_step < 0 && count > 1) {
    // Rows of a reversed dim: walk them in the input's order instead. Reads
    // that descend row by row are followed by no prefetcher, while the
    // streaming stores do not mind descending (a 4-op chain, FLOAT32
    // 256 MiB, 1 thread: 0.61x -> 1.69x memcpy).
    in += (count - 1) * in_step;
    out += (count - 1) * out_step;
    in_step = -in_step;
    out_step = -out_step;
  }
  if (d + 2 == dims_.size()) {
    const Dim& inner = dims_[d + 1];
    if (inner.segments.size() == 1 && inner.segments[0].reversed) {
      // Reverse along the innermost dim: every row is one reversal of
      // inner.size blocks; do them all in one call.
      ReverseRows(out, in, inner.size, block_, count, out_step, in_step, stream_);
      return;
    }
    const int64_t row_bytes = inner.size * block_;
    if (StreamWholeLineRows(inner.segments, in, in_step, out, out_step, count)) return;
    const bool rolled = inner.segments.size() == 2 && !inner.segments[0].reversed;
    if (stream_ && rolled && row_bytes <= kRollScratchBytes) {
      // Roll along the innermost dim, output past the cache, rows not whole
      // aligned lines: a row is two copies whose seam falls inside a cache
      // line, and a line that takes both an ordinary and a streaming store
      // is read back and written twice. Assemble the row in an L1 scratch
      // buffer instead and stream it out whole (0.77-0.89x memcpy ->
      // 0.99-1.09x for rows of 1-2 KiB, ../shared/perf-notes.md),
      // prefetching two rows ahead. (Reversed runs, below, write their
      // partial lines with ordinary stores only, so they go straight out:
      // staging them cost a second pass, 8-op chains 0.63x -> 0.98x memcpy.)
      alignas(64) char scratch[kRollScratchBytes];
      for (int64_t k = 0; k < count; ++k, in += in_step, out += out_step) {
        if (k + 2 < count) {
          for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(in + 2 * in_step + b);
        }
        for (const Segment& seg : inner.segments) {
          if (seg.reversed) {
            ReverseBlocks(scratch + seg.out_start * block_,
                          in + (seg.in_start - seg.count + 1) * block_, seg.count, block_);
          } else {
            std::memcpy(scratch + seg.out_start * block_, in + seg.in_start * block_,
                        seg.count * block_);
          }
        }
        CopyBytes(out, scratch, row_bytes, true);
      }
      return;
    }
    if (!rolled && std::all_of(inner.segments.begin(), inner.segments.end(),
                               [](const Segment& seg) { return seg.reversed; })) {
      // Reversed runs only (kReverseRoll).
      Runs(inner.segments, in, in_step, out, out_step, count);
      return;
    }
  }
  for (int64_t k = 0; k < count; ++k, in += in_step, out += out_step) Recurse(d + 1, in, out);
}

void AxisTransformPlan::RunRange(const void* in, void* out, int64_t begin, int64_t end) const {
  if (empty_ || begin >= end) return;
  RunRangeUnfenced(in, out, begin, end);
  // The caller may hand the output to another thread next (ParallelFor's
  // join, the reply): make the weakly ordered streaming stores visible first.
  if (stream_) StreamFence();
}

void AxisTransformPlan::RunRowsUnfenced(const void* in_v, int64_t in_step, void* out_v,
                                        int64_t out_step, int64_t rows) const {
  if (empty_ || rows <= 0) return;
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (in_step < 0 && rows > 1) {  // read in the input's order, as Rows does
    in += (rows - 1) * in_step;
    out += (rows - 1) * out_step;
    in_step = -in_step;
    out_step = -out_step;
  }
  if (dims_.size() != 1) {
    for (int64_t k = 0; k < rows; ++k) {
      RunRangeUnfenced(in + k * in_step, out + k * out_step, 0, outer_size());
    }
    return;
  }
  Runs(dims_[0].segments, in, in_step, out, out_step, rows);
}

bool AxisTransformPlan::StreamWholeLineRows(absl::Span<const Segment> segments, const char* in,
                                            int64_t in_step, char* out, int64_t out_step,
                                            int64_t rows) const {
#if defined(__x86_64__)
  // A roll or a rolled reversal along the innermost dim, output past the
  // cache, short rows of whole aligned lines (the server's big outputs are
  // page-aligned). Longer rows are two long copies, whose one shared line
  // does not matter.
  if (!stream_ || segments.size() != 2 || segments[0].reversed != segments[1].reversed) {
    return false;
  }
  const int64_t row_bytes = (segments[0].count + segments[1].count) * block_;
  if (row_bytes > kRollScratchBytes || row_bytes % 64 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 64 != 0 || out_step % 64 != 0) {
    return false;
  }
  if (!segments[0].reversed) {
    StreamRolledRows({out, in, row_bytes, segments[0].in_start * block_, rows, out_step, in_step});
    return true;
  }
  // Output element 0 reads input element c = segments[0].in_start.
  return StreamReverseRolledRows(
      {out, in, row_bytes, (segments[0].in_start + 1) * block_, rows, out_step, in_step}, block_);
#else
  (void)segments, (void)in, (void)in_step, (void)out, (void)out_step, (void)rows;
  return false;
#endif
}

void AxisTransformPlan::Runs(absl::Span<const Segment> segments, const char* in, int64_t in_step,
                             char* out, int64_t out_step, int64_t rows) const {
  if (StreamWholeLineRows(segments, in, in_step, out, out_step, rows)) return;
  // One call per run for a batch of rows, not a call per run and row; the
  // batches (~128 KiB) small enough that a line two runs share (written by
  // both with ordinary stores) is still in L2 for the second run (a pass per
  // run over all the rows read and wrote it twice from DRAM), and large
  // enough that the first rows of a batch, which ReverseRows does not
  // prefetch, are few (8-op chains, 256 MiB, 1 thread: 16 KiB batches
  // 0.72x, 128 KiB 0.90x memcpy).
  int64_t row_bytes = 0;
  for (const Segment& seg : segments) row_bytes += seg.count * block_;
  const int64_t batch =
      std::max<int64_t>(1, (int64_t{128} << 10) / std::max<int64_t>(1, row_bytes));
  for (int64_t k0 = 0; k0 < rows; k0 += batch) {
    const int64_t n = std::min(batch, rows - k0);
    const char* i = in + k0 * in_step;
    char* o = out + k0 * out_step;
    for (const Segment& seg : segments) {
      if (seg.reversed) {
        ReverseRows(o + seg.out_start * block_, i + (seg.in_start - seg.count + 1) * block_,
                    seg.count, block_, n, out_step, in_step, stream_);
        continue;
      }
      for (int64_t k = 0; k < n; ++k) {
        CopyBytes(o + k * out_step + seg.out_start * block_,
                  i + k * in_step + seg.in_start * block_, seg.count * block_, stream_);
      }
    }
  }
}

void AxisTransformPlan::RunRangeUnfenced(const void* in_v, void* out_v, int64_t begin,
                                         int64_t end) const {
  if (empty_ || begin >= end) return;
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (dims_.empty()) {
    // Everything folded: the op is a plain copy of one block, and glibc's
    // memcpy picks its own stores for that.
    if (begin == 0) std::memcpy(out, in, block_);
    return;
  }
  const Dim& dim = dims_[0];
  for (const Segment& s : dim.segments) {
    // Clip the segment to output rows [begin, end).
    const int64_t k0 = std::max<int64_t>(0, begin - s.out_start);
    const int64_t k1 = std::min<int64_t>(s.count, end - s.out_start);
    if (k0 >= k1) continue;
    const int64_t in_first = s.reversed ? s.in_start - k0 : s.in_start + k0;
    if (dims_.size() == 1) {
      if (s.reversed) {
        ReverseBlocks(out + (s.out_start + k0) * block_, in + (in_first - (k1 - k0) + 1) * block_,
                      k1 - k0, block_, stream_);
      } else {
        CopyBytes(out + (s.out_start + k0) * block_, in + in_first * block_, (k1 - k0) * block_,
                  stream_);
      }
      continue;
    }
    const int64_t in_step = s.reversed ? -dim.stride : dim.stride;
    Rows(0, in + in_first * dim.stride, in_step, out + (s.out_start + k0) * dim.stride, dim.stride,
         k1 - k0);
  }
}

}  // namespace tensorops
