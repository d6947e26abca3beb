// Shape helpers shared by the codec and the ops. Every function that can see
// caller-supplied numbers checks them and names the offending value.
#ifndef TENSOROPS_KERNELS_SHAPE_H_
#define TENSOROPS_KERNELS_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/tensor.h"

namespace tensorops {

// Element count of `dims`, rejecting negative dims and int64 overflow.
// `what` names the shape in messages, e.g. "inputs[0].shape"; the error's
// field path (kernels/field_path.h) is relative to the shape: "[i]" for a
// negative dim, "" for the whole.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims, absl::string_view what);
// Byte size of `dims` elements of `width` bytes, with the same checks.
absl::StatusOr<int64_t> CheckedByteSize(absl::Span<const int64_t> dims, int64_t width,
                                        absl::string_view what);

// Row-major strides in elements (innermost stride 1).
Shape RowMajorStrides(const Shape& shape);

// Maps `axis` in [-rank, rank-1] to [0, rank-1]; otherwise INVALID_ARGUMENT
// "<what> = 3 is out of range [-3, 2] for data of rank 3", its field path ""
// (the caller's axis value).
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what);

// "[2,3,4]"
std::string ShapeToString(absl::Span<const int64_t> dims);

// Caller-supplied text for an error message, cut to `max_len` bytes with "..."
// so a megabyte-long name never ends up in a status.
std::string BoundedQuote(absl::string_view text, size_t max_len = 64);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_SHAPE_H_
