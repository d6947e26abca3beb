// Short rows rolled (or reversed and rolled) along their own bytes, written
// to an output past the cache as whole streamed lines: the innermost loops of
// AxisTransformPlan's rolls and of fused chains that compose to a rolled
// reversal (strided_copy.cc, StreamWholeLineRows).
//
// Thread-safety: stateless; calls on disjoint outputs may run concurrently.
// The caller fences (StreamFence) before another thread reads the output.
#ifndef TENSOROPS_KERNELS_ROLLED_ROWS_H_
#define TENSOROPS_KERNELS_ROLLED_ROWS_H_

#include <cstdint>

namespace tensorops {

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
// Writes r's rows, rolled, on the active KernelIsa.
void StreamRolledRows(const RolledRows& r);

// Rows reversed and rolled along their own `width`-byte elements (what a
// chain of Reverses and Rolls composes to along an axis): out element e =
// in element (c - e) mod n, with r.off = (c + 1) * width. False (nothing
// written) for a width without a lane reversal (not 1, 2, 4, 8, 16).
bool StreamReverseRolledRows(const RolledRows& r, int64_t width);
#endif

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_ROLLED_ROWS_H_
