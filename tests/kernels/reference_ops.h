// Reference implementations of the four ops: the oracle the kernels are
// compared against. Deliberately plain: for every output element, unravel its
// flat index into coordinates, compute the source coordinates, ravel, and copy
// `width` bytes. No shape simplification, no memcpy of rows, no threads.
//
// Inputs must already be valid (axes in range, lengths in range, ...): these
// functions do not validate. STRING elements are moved as their 16-byte
// StringRef, so a result references the same string bytes as its input.
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_TESTS_KERNELS_REFERENCE_OPS_H_
#define TENSOROPS_TESTS_KERNELS_REFERENCE_OPS_H_

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "tests/kernels/test_util.h"

namespace tensorops {
namespace test {

// --- Byte level: `in` and `out` hold NumElements(shape) * width bytes. ---

// Reverses every axis listed in `axes` once; entries may be negative (counted
// from the end) and repeated (a repeat changes nothing).
void ReferenceReverseBytes(const Shape& shape, int64_t width, const void* in, void* out,
                           const std::vector<int64_t>& axes);

// For every index b along batch_axis, reverses the first seq_lengths[b]
// elements along seq_axis (0 and 1 reverse nothing). Axes may be negative.
void ReferenceReverseSequenceBytes(const Shape& shape, int64_t width, const void* in, void* out,
                                   int64_t batch_axis, int64_t seq_axis,
                                   const std::vector<int64_t>& seq_lengths);

// out[.., (i + shift) mod d, ..] = in[.., i, ..] for each axis; shifts of a
// repeated axis add up. `shift` has one entry per axis, or a single entry
// applied to every axis. Shifts may be any int64, including the extremes.
void ReferenceRollBytes(const Shape& shape, int64_t width, const void* in, void* out,
                        const std::vector<int64_t>& shift, const std::vector<int64_t>& axes);

// --- Tensor level: a new tensor of the input's dtype and shape. ---

TestTensor ReferenceReverse(const TestTensor& data, const std::vector<int64_t>& axes);
TestTensor ReferenceReverseMask(const TestTensor& data, const std::vector<bool>& mask);
TestTensor ReferenceReverseSequence(const TestTensor& data, int64_t batch_axis, int64_t seq_axis,
                                    const std::vector<int64_t>& seq_lengths);
TestTensor ReferenceRoll(const TestTensor& data, const std::vector<int64_t>& shift,
                         const std::vector<int64_t>& axes);
// ONNX ReverseSequence: the same movement with time_axis as the sequence axis.
TestTensor ReferenceOnnxReverseSequence(const TestTensor& data, int64_t batch_axis,
                                        int64_t time_axis,
                                        const std::vector<int64_t>& sequence_lens);

}  // namespace test
}  // namespace tensorops

#endif  // TENSOROPS_TESTS_KERNELS_REFERENCE_OPS_H_
