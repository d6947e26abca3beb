#include "kernels/tensor_values.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/float_formats.h"

namespace tensorops {
namespace {

template <typename T>
T Load(const TensorView& t, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(t.data) + i * sizeof(T), sizeof(T));
  return v;
}

// The value of element i of a floating tensor, widened exactly to double.
double LoadFloating(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat32:
      return Load<float>(t, i);
    case DType::kFloat64:
      return Load<double>(t, i);
    case DType::kFloat16:
      return HalfToFloat(Load<uint16_t>(t, i));
    case DType::kBFloat16:
      return BFloat16ToFloat(Load<uint16_t>(t, i));
    case DType::kFloat8E4M3:
      return Float8E4M3ToFloat(Load<uint8_t>(t, i));
    case DType::kFloat8E5M2:
      return Float8E5M2ToFloat(Load<uint8_t>(t, i));
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIntegers(const TensorView& t, absl::string_view what) {
  const int64_t n = t.num_elements();
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kInt8:
        out[i] = Load<int8_t>(t, i);
        break;
      case DType::kInt16:
        out[i] = Load<int16_t>(t, i);
        break;
      case DType::kInt32:
        out[i] = Load<int32_t>(t, i);
        break;
      case DType::kInt64:
        out[i] = Load<int64_t>(t, i);
        break;
      case DType::kUInt8:
        out[i] = Load<uint8_t>(t, i);
        break;
      case DType::kUInt16:
        out[i] = Load<uint16_t>(t, i);
        break;
      case DType::kUInt32:
        out[i] = Load<uint32_t>(t, i);
        break;
      case DType::kUInt64: {
        const uint64_t v = Load<uint64_t>(t, i);
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return InvalidArgumentAt(absl::StrCat(".data[", i, "]"),
                                   absl::StrCat(what, "[", i, "] = ", v, " is too large"));
        }
        out[i] = static_cast<int64_t>(v);
        break;
      }
      default:
        return InvalidArgumentAt(
            ".dtype", absl::StrCat(what, " must have an integer type, got ", DTypeName(t.dtype)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ReadWholeNumbers(const TensorView& t, absl::string_view what) {
  if (IsIntegerDType(t.dtype)) return ReadIntegers(t, what);
  if (!IsFloatingDType(t.dtype)) {
    return InvalidArgumentAt(
        ".dtype",
        absl::StrCat(what, " must have an integer or floating type, got ", DTypeName(t.dtype)));
  }
  const int64_t n = t.num_elements();
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = LoadFloating(t, i);
    if (!std::isfinite(v) || std::trunc(v) != v) {
      return InvalidArgumentAt(absl::StrCat(".data[", i, "]"),
                               absl::StrCat(what, "[", i, "] = ", v, " is not a whole number"));
    }
    // 2^63 is the first double past int64's range.
    if (std::fabs(v) >= 9223372036854775808.0) {
      return InvalidArgumentAt(absl::StrCat(".data[", i, "]"),
                               absl::StrCat(what, "[", i, "] = ", v, " is too large"));
    }
    out[i] = static_cast<int64_t>(v);
  }
  return out;
}

std::vector<bool> ReadBools(const TensorView& t) {
  const int64_t n = t.num_elements();
  std::vector<bool> out(n);
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (int64_t i = 0; i < n; ++i) out[i] = p[i] != 0;
  return out;
}

}  // namespace tensorops
