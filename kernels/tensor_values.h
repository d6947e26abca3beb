// Reading small index-like input tensors (axes, shifts, sequence lengths)
// as int64 values, with the checks every op needs.
#ifndef TENSOROPS_KERNELS_TENSOR_VALUES_H_
#define TENSOROPS_KERNELS_TENSOR_VALUES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/tensor.h"

namespace tensorops {

// Errors' field paths (kernels/field_path.h) are relative to the tensor:
// ".data[i]" for an element, ".dtype" for its type.

// Elements of an integer tensor (INT8..INT64, UINT8..UINT64) as int64.
// A UINT64 value above INT64_MAX is INVALID_ARGUMENT "<what>[i] = v is too large".
absl::StatusOr<std::vector<int64_t>> ReadIntegers(const TensorView& t, absl::string_view what);

// Elements of an integer or floating tensor that must be whole numbers, as int64.
// NaN, infinities and fractions are INVALID_ARGUMENT "<what>[i] = 1.5 is not a
// whole number"; magnitudes beyond int64 are rejected as too large.
absl::StatusOr<std::vector<int64_t>> ReadWholeNumbers(const TensorView& t, absl::string_view what);

// Elements of a BOOL tensor.
std::vector<bool> ReadBools(const TensorView& t);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_TENSOR_VALUES_H_
