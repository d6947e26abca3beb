#include "tests/kernels/reference_ops.h"

#include <cstring>

namespace tensorops {
namespace test {
namespace {

int64_t Rank(const Shape& shape) { return static_cast<int64_t>(shape.size()); }

int64_t Normalize(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// Row-major flat index -> coordinates.
std::vector<int64_t> Unravel(const Shape& shape, int64_t flat) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = flat % shape[d];
    flat /= shape[d];
  }
  return coords;
}

// Coordinates -> row-major flat index.
int64_t Ravel(const Shape& shape, const std::vector<int64_t>& coords) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + coords[d];
  return flat;
}

void CopyElement(const void* in, int64_t src, void* out, int64_t dst, int64_t width) {
  std::memcpy(static_cast<char*>(out) + dst * width, static_cast<const char*>(in) + src * width,
              static_cast<size_t>(width));
}

// x mod d in [0, d) for any int64 x (no overflow, INT64_MIN included).
int64_t PositiveMod(int64_t x, int64_t d) {
  int64_t r = x % d;
  if (r < 0) r += d;
  return r;
}

TestTensor SameAs(const TestTensor& data) {
  TestTensor out;
  out.dtype = data.dtype;
  out.shape = data.shape;
  out.bytes.assign(static_cast<size_t>(data.num_bytes()) + 1, 0xAB);
  out.strings = data.strings;  // the result's StringRefs point into the input's storage
  return out;
}

}  // namespace

void ReferenceReverseBytes(const Shape& shape, int64_t width, const void* in, void* out,
                           const std::vector<int64_t>& axes) {
  const int64_t rank = Rank(shape);
  std::vector<bool> reversed(static_cast<size_t>(rank), false);
  for (int64_t a : axes) reversed[static_cast<size_t>(Normalize(a, rank))] = true;
  const int64_t n = NumElements(shape);
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> c = Unravel(shape, o);
    for (int64_t d = 0; d < rank; ++d) {
      if (reversed[d]) c[d] = shape[d] - 1 - c[d];
    }
    CopyElement(in, Ravel(shape, c), out, o, width);
  }
}

void ReferenceReverseSequenceBytes(const Shape& shape, int64_t width, const void* in, void* out,
                                   int64_t batch_axis, int64_t seq_axis,
                                   const std::vector<int64_t>& seq_lengths) {
  const int64_t rank = Rank(shape);
  const int64_t b_axis = Normalize(batch_axis, rank);
  const int64_t s_axis = Normalize(seq_axis, rank);
  const int64_t n = NumElements(shape);
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> c = Unravel(shape, o);
    const int64_t len = seq_lengths[static_cast<size_t>(c[b_axis])];
    if (c[s_axis] < len) c[s_axis] = len - 1 - c[s_axis];
    CopyElement(in, Ravel(shape, c), out, o, width);
  }
}

void ReferenceRollBytes(const Shape& shape, int64_t width, const void* in, void* out,
                        const std::vector<int64_t>& shift, const std::vector<int64_t>& axes) {
  const int64_t rank = Rank(shape);
  // Total shift per axis, kept in [0, dim) so the sum never overflows.
  std::vector<int64_t> total(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = Normalize(axes[i], rank);
    const int64_t dim = shape[axis];
    if (dim == 0) continue;
    const int64_t s = shift.size() == 1 ? shift[0] : shift[i];
    total[axis] = (total[axis] + PositiveMod(s, dim)) % dim;
  }
  const int64_t n = NumElements(shape);
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> c = Unravel(shape, o);
    // The output at c came from c - shift (mod dim).
    for (int64_t d = 0; d < rank; ++d) c[d] = PositiveMod(c[d] - total[d], shape[d]);
    CopyElement(in, Ravel(shape, c), out, o, width);
  }
}

TestTensor ReferenceReverse(const TestTensor& data, const std::vector<int64_t>& axes) {
  TestTensor out = SameAs(data);
  ReferenceReverseBytes(data.shape, ElementWidth(data.dtype), data.bytes.data(), out.bytes.data(),
                        axes);
  return out;
}

TestTensor ReferenceReverseMask(const TestTensor& data, const std::vector<bool>& mask) {
  std::vector<int64_t> axes;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) axes.push_back(static_cast<int64_t>(i));
  }
  return ReferenceReverse(data, axes);
}

TestTensor ReferenceReverseSequence(const TestTensor& data, int64_t batch_axis, int64_t seq_axis,
                                    const std::vector<int64_t>& seq_lengths) {
  TestTensor out = SameAs(data);
  ReferenceReverseSequenceBytes(data.shape, ElementWidth(data.dtype), data.bytes.data(),
                                out.bytes.data(), batch_axis, seq_axis, seq_lengths);
  return out;
}

TestTensor ReferenceRoll(const TestTensor& data, const std::vector<int64_t>& shift,
                         const std::vector<int64_t>& axes) {
  TestTensor out = SameAs(data);
  ReferenceRollBytes(data.shape, ElementWidth(data.dtype), data.bytes.data(), out.bytes.data(),
                     shift, axes);
  return out;
}

TestTensor ReferenceOnnxReverseSequence(const TestTensor& data, int64_t batch_axis,
                                        int64_t time_axis,
                                        const std::vector<int64_t>& sequence_lens) {
  // ONNX: "the output slice i contains reversed sequences on the first
  // sequence_lens[i] elements, then original values copied for the other
  // elements" -- exactly ReverseSequence with seq_axis = time_axis.
  return ReferenceReverseSequence(data, batch_axis, time_axis, sequence_lens);
}

}  // namespace test
}  // namespace tensorops
