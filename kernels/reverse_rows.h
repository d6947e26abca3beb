// Reversal of rows of fixed-size blocks: the innermost loop of every
// reversing op (AxisTransformPlan, SequenceReversePlan, fused chains).
//
// Thread-safety: stateless; calls on disjoint outputs may run concurrently.
#ifndef TENSOROPS_KERNELS_REVERSE_ROWS_H_
#define TENSOROPS_KERNELS_REVERSE_ROWS_H_

#include <cstdint>

namespace tensorops {

// Writes n blocks of `block` bytes to dst in the reverse order of src:
// dst block i = src block (n-1-i). Element widths 1, 2, 4, 8, 16 reverse
// lanes on the active KernelIsa (kernel_isa.h): with `stream`, whole
// output lines with streaming stores on AVX2, SSE2 or scalar loops alike;
// without, AVX2 lanes or a typed scalar loop. Other block sizes: a copy per
// block (with `stream`, our own streamed copy inline, never glibc's). The
// caller fences after `stream`.
void ReverseBlocks(void* dst, const void* src, int64_t n, int64_t block, bool stream = false);
// ReverseBlocks on `rows` rows at once: row r reads src + r*src_step and
// writes dst + r*dst_step (steps in bytes, may be negative).
void ReverseRows(void* dst, const void* src, int64_t n, int64_t block, int64_t rows,
                 int64_t dst_step, int64_t src_step, bool stream = false);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_REVERSE_ROWS_H_
