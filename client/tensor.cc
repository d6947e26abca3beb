#include "tensorops/tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/dtype.h"
#include "kernels/float_formats.h"
#include "wire/dtypes.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

// The one dtype table (wire/dtypes.h): DataType is numbered like DType.
DType ToDType(DataType dtype) { return static_cast<DType>(static_cast<int>(dtype)); }

bool IsValid(DataType dtype) { return IsValidDType(ToDType(dtype)); }

// Product of dims, or -1 if a dim is negative or the product overflows.
int64_t CountOrMinusOne(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

std::shared_ptr<const std::string> OwnBytes(const void* data, int64_t bytes) {
  auto s = std::make_shared<std::string>();
  if (bytes > 0) s->assign(static_cast<const char*>(data), static_cast<size_t>(bytes));
  return s;
}

}  // namespace

absl::string_view DataTypeName(DataType dtype) { return DTypeName(ToDType(dtype)); }

int64_t DataTypeWidth(DataType dtype) { return GetDTypeRow(ToDType(dtype)).sdk_width; }

Tensor::Tensor() = default;

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape, const void* values, int64_t count)
    : dtype_(dtype), shape_(std::move(shape)) {
  num_bytes_ = count * DataTypeWidth(dtype);
  auto owned = OwnBytes(values, num_bytes_);
  data_ = owned->data();
  owned_ = std::move(owned);
}

Tensor::Tensor(const std::vector<bool>& values, std::vector<int64_t> shape)
    : dtype_(DataType::kBool), shape_(std::move(shape)) {
  auto s = std::make_shared<std::string>(values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) (*s)[i] = values[i] ? 1 : 0;
  num_bytes_ = static_cast<int64_t>(values.size());
  data_ = s->data();
  owned_ = std::move(s);
}

Tensor::Tensor(std::vector<std::string> values, std::vector<int64_t> shape)
    : dtype_(DataType::kString), shape_(std::move(shape)) {
  strings_ = std::make_shared<const std::vector<std::string>>(std::move(values));
}

Tensor Tensor::View(DataType dtype, std::vector<int64_t> shape, const void* data) {
  Tensor t;
  t.dtype_ = dtype == DataType::kString ? DataType::kInvalid : dtype;
  t.shape_ = std::move(shape);
  const int64_t n = CountOrMinusOne(t.shape_);
  t.num_bytes_ = n < 0 ? 0 : n * DataTypeWidth(dtype);
  t.data_ = data;
  t.is_view_ = true;
  return t;
}

Tensor Tensor::Copy(DataType dtype, std::vector<int64_t> shape, const void* data) {
  Tensor t = View(dtype, std::move(shape), data);
  auto owned = OwnBytes(data, t.num_bytes_);
  t.data_ = owned->data();
  t.owned_ = std::move(owned);
  t.is_view_ = false;
  return t;
}

Tensor Tensor::FromBits(DataType dtype, const std::vector<uint16_t>& bits,
                        std::vector<int64_t> shape) {
  if (DataTypeWidth(dtype) != 2) dtype = DataType::kInvalid;
  return Tensor(dtype, std::move(shape), bits.data(), static_cast<int64_t>(bits.size()));
}

Tensor Tensor::FromBits(DataType dtype, const std::vector<uint8_t>& bits,
                        std::vector<int64_t> shape) {
  if (DataTypeWidth(dtype) != 1) dtype = DataType::kInvalid;
  return Tensor(dtype, std::move(shape), bits.data(), static_cast<int64_t>(bits.size()));
}

Tensor Tensor::FromFloats(DataType dtype, const std::vector<float>& values,
                          std::vector<int64_t> shape) {
  const int64_t n = static_cast<int64_t>(values.size());
  switch (dtype) {
    case DataType::kFloat32:
      return Tensor(values, std::move(shape));
    case DataType::kFloat64:
      return Tensor(std::vector<double>(values.begin(), values.end()), std::move(shape));
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      std::vector<uint16_t> bits(n);
      for (int64_t i = 0; i < n; ++i) {
        bits[i] = dtype == DataType::kFloat16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
      }
      return FromBits(dtype, bits, std::move(shape));
    }
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: {
      std::vector<uint8_t> bits(n);
      for (int64_t i = 0; i < n; ++i) {
        bits[i] = dtype == DataType::kFloat8E4M3 ? FloatToFloat8E4M3(values[i])
                                                 : FloatToFloat8E5M2(values[i]);
      }
      return FromBits(dtype, bits, std::move(shape));
    }
    default:
      return Tensor();  // invalid: Validate() says so
  }
}

int64_t Tensor::num_elements() const {
  const int64_t n = CountOrMinusOne(shape_);
  return n < 0 ? 0 : n;
}

absl::Span<const std::string> Tensor::strings() const {
  if (strings_ == nullptr) return {};
  return absl::MakeConstSpan(*strings_);
}

absl::Status Tensor::Validate() const {
  if (!IsValid(dtype_)) {
    return absl::InvalidArgumentError(
        "tensor has no valid element type (default-constructed, or a factory got "
        "a type it does not take)");
  }
  const int64_t n = CountOrMinusOne(shape_);
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape_, ","),
                                                   "] has a negative dim or too many elements"));
  }
  const int64_t have = dtype_ == DataType::kString
                           ? static_cast<int64_t>(strings_ ? strings_->size() : 0)
                           : num_bytes_ / DataTypeWidth(dtype_);
  if (have != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(have, " ", DataTypeName(dtype_), " values for shape [",
                     absl::StrJoin(shape_, ","), "] of ", n, " elements"));
  }
  if (is_view_ && data_ == nullptr && n > 0) {
    return absl::InvalidArgumentError("view of a null pointer");
  }
  return absl::OkStatus();
}

absl::Status Tensor::TypeMismatch(DataType wanted) const {
  return absl::InvalidArgumentError(
      absl::StrCat("tensor holds ", DataTypeName(dtype_), ", not ", DataTypeName(wanted)));
}

absl::StatusOr<std::vector<float>> Tensor::ToFloats() const {
  const int64_t n = num_bytes_ / std::max<int64_t>(1, DataTypeWidth(dtype_));
  std::vector<float> out(dtype_ == DataType::kString ? 0 : n);
  const auto* p = static_cast<const unsigned char*>(data_);
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    switch (dtype_) {
      case DataType::kFloat32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case DataType::kFloat64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = dtype_ == DataType::kFloat16 ? HalfToFloat(b) : BFloat16ToFloat(b);
        break;
      }
      case DataType::kFloat8E4M3:
        out[i] = Float8E4M3ToFloat(p[i]);
        break;
      case DataType::kFloat8E5M2:
        out[i] = Float8E5M2ToFloat(p[i]);
        break;
      default:
        return TypeMismatch(DataType::kFloat32);
    }
  }
  if (out.empty() && !(dtype_ == DataType::kFloat32 || dtype_ == DataType::kFloat64 ||
                       dtype_ == DataType::kFloat16 || dtype_ == DataType::kBFloat16 ||
                       dtype_ == DataType::kFloat8E4M3 || dtype_ == DataType::kFloat8E5M2)) {
    return TypeMismatch(DataType::kFloat32);
  }
  return out;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DataTypeName(dtype_), "[", absl::StrJoin(shape_, ","), "]");
}

bool Tensor::Equals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (dtype_ == DataType::kString) {
    auto a = strings(), b = other.strings();
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  return num_bytes_ == other.num_bytes_ &&
         (num_bytes_ == 0 || std::memcmp(data_, other.data_, num_bytes_) == 0);
}

}  // namespace client_v1
}  // namespace tensorops
