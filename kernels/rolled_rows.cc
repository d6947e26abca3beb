#include "kernels/rolled_rows.h"

#include <cstdint>
#include <cstring>

#include "kernels/kernel_isa.h"
#include "kernels/lane_reverse.h"
#include "kernels/streaming_store.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorops {
#if defined(__x86_64__)
namespace {

// The one line of a row whose 64 source bytes, from byte s on, run past the
// row's end and on from its start: the row's last 64 bytes and its first 64
// side by side in `buf` (128 bytes; rows are whole lines, so at least 64
// bytes), the line then at buf + 64 - (row - s). Two fixed 64-byte copies:
// copies sized by the split took a branch per size class and ~30
// instructions per row (callgrind, 8-op UINT8 chain).
inline void AssembleWrap(char* buf, const char* in, int64_t row) {
  std::memcpy(buf, in + row - 64, 64);
  std::memcpy(buf + 64, in, 64);
}

// The row loops below, shared: every row's lines read the same offsets, so
// the line that wraps is found once, not tested per line, and it is
// assembled one row ahead in a double buffer. Read back at once, the stores
// that build it cannot be forwarded to the loads that read it (a load at the
// line's offset spans two of them), which stalls the load until they reach L1 (on Intel cores a
// dozen cycles or more, per row; a 256-byte row at DRAM speed has ~60). The
// caller's struct is copied into locals: after a store through a may-alias
// vector pointer the compiler would reload every field of it.
//
// row_fn(in, out, wrap_buf) writes one row; `wrap_at` is the byte offset
// of the wrapping line in the row (-1: none) and `wrap_src` its source offset.
template <typename RowFn>
inline void ForEachRolledRow(const RolledRows& r, int64_t wrap_at, int64_t wrap_src, RowFn row_fn) {
  const int64_t row = r.row, count = r.count, in_step = r.in_step, out_step = r.out_step;
  alignas(64) char wrap[2][128];
  const int64_t line = wrap_at >= 0 ? 64 - (row - wrap_src) : 0;  // the line in `wrap`
  if (wrap_at >= 0 && count > 0) AssembleWrap(wrap[0], r.in, row);
  const char* in = r.in;
  char* out = r.out;
  for (int64_t k = 0; k < count; ++k, in += in_step, out += out_step) {
    if (k + 2 < count) {
      for (int64_t b = 0; b < row; b += 64) _mm_prefetch(in + 2 * in_step + b, _MM_HINT_T0);
    }
    if (wrap_at >= 0 && k + 1 < count) AssembleWrap(wrap[(k + 1) & 1], in + in_step, row);
    row_fn(in, out, wrap[k & 1] + line);
  }
}

// Output line j reads source bytes from (off + j) mod row: the lines before
// `split` = row - off read in + off + j, the wrapping one (when off is not a
// line multiple) straddles the end, the rest read in + off + j - row.
template <typename Line>
void StreamRolledRowsWith(const RolledRows& r) {
  const int64_t row = r.row, off = r.off, split = row - off;
  const int64_t plain = split / 64 * 64;  // lines [0, plain) read in + off + j
  const bool wraps = split % 64 != 0;
  const int64_t rest = wraps ? plain + 64 : plain;
  ForEachRolledRow(r, wraps ? plain : -1, off + plain,
                   [&](const char* in, char* out, const char* wrap) {
                     for (int64_t j = 0; j < plain; j += 64) Line::Copy(out + j, in + off + j);
                     if (wraps) Line::Copy(out + plain, wrap);
                     for (int64_t j = rest; j < row; j += 64)
                       Line::Copy(out + j, in + off + j - row);
                   });
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
//
// Output line j reads the 64 source bytes that end at (off - j) mod row: the
// lines before `plain` = off rounded down to a line read in + off - 64 - j,
// the wrapping one (when off is not a line multiple) straddles the end, the
// rest read in + off - 64 - j + row.
template <typename Rev, int kWidth>
void StreamReverseRolledRowsWith(const RolledRows& r) {
  const int64_t row = r.row, off = r.off;  // off is in (0, row]
  const int64_t plain = off / 64 * 64;
  const bool wraps = off % 64 != 0;
  const int64_t rest = wraps ? plain + 64 : plain;
  ForEachRolledRow(r, wraps ? plain : -1, off - 64 - plain + row,
                   [&](const char* in, char* out, const char* wrap) {
                     for (int64_t j = 0; j < plain; j += 64) {
                       Rev::template Reverse<kWidth>(out + j, in + off - 64 - j);
                     }
                     if (wraps) Rev::template Reverse<kWidth>(out + plain, wrap);
                     for (int64_t j = rest; j < row; j += 64) {
                       Rev::template Reverse<kWidth>(out + j, in + off - 64 - j + row);
                     }
                   });
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
  return WithLaneWidth(width, [&](auto w) { StreamReverseRolledRowsOf<decltype(w)::value>(r); });
}

#endif
}  // namespace tensorops
