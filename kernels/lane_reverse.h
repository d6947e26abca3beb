// Element reversal inside registers, per instruction set: the pieces the
// reversing kernels (reverse_rows.cc, rolled_rows.cc) are built from.
// Internal to kernels/; everything here is inline, for loops compiled once
// per ISA tag through IsaDispatch (kernel_isa.h).
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_KERNELS_LANE_REVERSE_H_
#define TENSOROPS_KERNELS_LANE_REVERSE_H_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kernel_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorops {

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

// WithLaneWidth over the widths of `kWidths`.
template <typename Fn, int... kWidths>
bool WithLaneWidthIn(int64_t width, Fn&& fn, std::integer_sequence<int, kWidths...>) {
  return ((width == kWidths && (fn(std::integral_constant<int, kWidths>{}), true)) || ...);
}
// Calls fn(std::integral_constant<int, W>{}) for a lane width W of 1, 2, 4,
// 8 or 16 bytes and returns true; false (fn not called) for any other width:
// the one switch from a runtime width to the kernels instantiated per width.
//
// Example:
//   if (WithLaneWidth(block, [&](auto w) { ReverseRowsOf<decltype(w)::value>(a); })) return;
template <typename Fn>
bool WithLaneWidth(int64_t width, Fn&& fn) {
  return WithLaneWidthIn(width, fn, std::integer_sequence<int, 1, 2, 4, 8, 16>{});
}

#if defined(__x86_64__)
// GCC 12 does not vectorise a loop that reads backwards, so the reversal of
// 1/2/4/8/16-byte elements is written per instruction set (KernelIsa): AVX2
// lane shuffles, SSE2 word shuffles, or 8-byte words in general registers.
// Each step loads from the end of the row, reverses the lanes, stores them at
// the front.
//
// AVX2: 32 bytes loaded with their elements reversed. For 1-, 2- and
// 16-byte elements the loads themselves swap the two 16-byte halves (a
// 16-byte load and a vinserti128 from memory, which run on the load ports and
// any vector ALU) and at most an in-lane byte shuffle follows: the cross-lane
// vpermq these used after the byte shuffle runs on port 5 alone with latency
// 3 on Intel cores, where the byte shuffle also wants port 5 (issue 44:
// last-axis reversals at 0.71-0.80x memcpy on an AVX-512 Xeon). Same
// instruction count. 4- and 8-byte elements keep their one cross-lane
// permute (vpermd / vpermq), which is the whole reversal: the swapped load
// would add an instruction (callgrind: 8-op FLOAT32 chains +9%).
template <int kWidth>
__attribute__((target("avx2"))) inline __m256i LoadReversed(const char* p) {
  if constexpr (kWidth == 4) {
    return _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                       _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  } else if constexpr (kWidth == 8) {
    return _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 0x1B);
  } else {
    const __m256i swapped = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), 1);
    if constexpr (kWidth == 1) {
      return _mm256_shuffle_epi8(
          swapped, _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14,
                                    13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    } else if constexpr (kWidth == 2) {
      return _mm256_shuffle_epi8(
          swapped, _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15,
                                    12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1));
    } else {
      static_assert(kWidth == 16);
      return swapped;
    }
  }
}

template <int kWidth>
__attribute__((target("avx2"))) inline void ReverseOneAvx2(char* dst, const char* src, int64_t n) {
  constexpr int64_t kLanes = 32 / kWidth;
  if (n < kLanes) {
    ReverseScalar<typename ScalarOf<kWidth>::type>(dst, src, n);
    return;
  }
  // Read ascending (the prefetcher streams it), write descending.
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256i a = LoadReversed<kWidth>(src + i * kWidth);
    const __m256i b = LoadReversed<kWidth>(src + (i + kLanes) * kWidth);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - kLanes) * kWidth), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - 2 * kLanes) * kWidth), b);
  }
  if (i + kLanes <= n) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (n - i - kLanes) * kWidth),
                        LoadReversed<kWidth>(src + i * kWidth));
    i += kLanes;
  }
  if (i < n) {
    // Tail: dst[0, n-i) still needs src[i, n). The last full vector of src,
    // reversed, is dst[0, kLanes): it covers the tail and rewrites the few
    // elements after it with the values they already have (out of place, so
    // no overlap with src).
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        LoadReversed<kWidth>(src + (n - kLanes) * kWidth));
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
    const __m256i hi = LoadReversed<kWidth>(src + 32);
    const __m256i lo = LoadReversed<kWidth>(src);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), hi);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), lo);
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

// The lane reversal of an ISA tag.
template <typename Isa>
using RevOf = ByIsa<Isa, ScalarRev, Sse2Rev, Avx2Rev>;
#endif

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_LANE_REVERSE_H_
