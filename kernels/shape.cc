#include "kernels/shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/field_path.h"

namespace tensorops {

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims, absl::string_view what) {
  // Check every dim for sign first: a zero dim must not hide a negative one.
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return InvalidArgumentAt(absl::StrCat("[", i, "]"),
                               absl::StrCat(what, "[", i, "] = ", dims[i], " is negative"));
    }
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (n > std::numeric_limits<int64_t>::max() / dims[i]) {
      return InvalidArgumentAt(
          "", absl::StrCat(what, " ", ShapeToString(dims), " has more elements than fit in int64"));
    }
    n *= dims[i];
  }
  return n;
}

absl::StatusOr<int64_t> CheckedByteSize(absl::Span<const int64_t> dims, int64_t width,
                                        absl::string_view what) {
  auto n = CheckedNumElements(dims, what);
  if (!n.ok()) return n.status();
  if (width > 0 && *n > std::numeric_limits<int64_t>::max() / width) {
    return InvalidArgumentAt("", absl::StrCat(what, " ", ShapeToString(dims),
                                              " has a byte size that does not fit in int64"));
  }
  return *n * width;
}

Shape RowMajorStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    if (rank == 0) {
      return InvalidArgumentAt(
          "", absl::StrCat(what, " = ", axis, " is out of range: data of rank 0 has no axes"));
    }
    return InvalidArgumentAt("", absl::StrCat(what, " = ", axis, " is out of range [", -rank, ", ",
                                              rank - 1, "] for data of rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

std::string ShapeToString(absl::Span<const int64_t> dims) {
  // Bounded: a hostile rank must not make a long message.
  constexpr size_t kMaxShown = 16;
  if (dims.size() <= kMaxShown) return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
  return absl::StrCat("[", absl::StrJoin(dims.subspan(0, kMaxShown), ","), ",... (rank ",
                      dims.size(), ")]");
}

std::string BoundedQuote(absl::string_view text, size_t max_len) {
  if (text.size() <= max_len) return absl::StrCat("\"", text, "\"");
  return absl::StrCat("\"", text.substr(0, max_len), "...\" (", text.size(), " bytes)");
}

}  // namespace tensorops
