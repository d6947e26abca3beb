#include "kernels/rolled_rows.h"

#include <cstdint>

#include "kernels/kernel_isa.h"
#include "kernels/lane_reverse.h"
#include "kernels/streaming_store.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorops {
#if defined(__x86_64__)
namespace {

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

struct RolledRowsStream {
  template <typename Isa>
  static void Run(const RolledRows* r) {
    StreamRolledRowsWith<LineOf<Isa>>(*r);
  }
};

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
struct ReverseRolledRowsStream {
  template <typename Isa>
  static void Run(const RolledRows* r) {
    StreamReverseRolledRowsWith<RevOf<Isa>, kWidth>(*r);
  }
};

template <int kWidth>
void StreamReverseRolledRowsOf(const RolledRows& r) {
  IsaDispatch<ReverseRolledRowsStream<kWidth>>::Run(&r);
}

}  // namespace

void StreamRolledRows(const RolledRows& r) { IsaDispatch<RolledRowsStream>::Run(&r); }

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

#endif
}  // namespace tensorops
