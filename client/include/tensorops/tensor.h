// tensorops::Tensor: the SDK's value type for one tensor (element type, shape,
// elements in row-major order), independent of the wire format.
//
// A Tensor either owns its elements (built from a std::vector, or copied) or
// views memory the caller owns (Tensor::View): a view must not outlive that
// memory, and the memory must not change while a call that uses it runs.
// Owned elements are immutable and shared between copies, so copying a Tensor
// is cheap.
//
// Thread-safety: a Tensor is immutable after construction; const access from
// many threads at once is safe.
#ifndef TENSOROPS_CLIENT_TENSOR_H_
#define TENSOROPS_CLIENT_TENSOR_H_

#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensorops/export.h"

namespace tensorops {
// The inline namespace keeps the SDK's symbols apart from the server's
// internal types of the same name; users write tensorops::Tensor.
inline namespace client_v1 {

// Element types, numbered as on the wire (tensorops.v1.DataType).
enum class DataType : int {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,   // IEEE binary16; stored as uint16_t bits
  kBFloat16 = 4,  // bfloat16; stored as uint16_t bits
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kUInt8 = 9,
  kUInt16 = 10,
  kUInt32 = 11,
  kUInt64 = 12,
  kBool = 13,        // one byte per element, 0 or 1
  kString = 14,      // arbitrary bytes per element
  kComplex64 = 15,   // std::complex<float>
  kComplex128 = 16,  // std::complex<double>
  kFloat8E4M3 = 17,  // OCP/ONNX E4M3FN; stored as uint8_t bits
  kFloat8E5M2 = 18,  // E5M2; stored as uint8_t bits
};

// "FLOAT32", ..., as in DATA_TYPE_FLOAT32 without the prefix; "INVALID" otherwise.
TENSOROPS_EXPORT absl::string_view DataTypeName(DataType dtype);
// Bytes per element in packed little-endian form; 0 for STRING and kInvalid.
TENSOROPS_EXPORT int64_t DataTypeWidth(DataType dtype);

// The element type a C++ type stands for. Narrow floats have no C++ type: use
// Tensor::FromFloats or Tensor::FromBits for them.
template <typename T>
struct DataTypeOf;
#define TENSOROPS_DATA_TYPE_OF_(T, D)              \
  template <>                                      \
  struct DataTypeOf<T> {                           \
    static constexpr DataType value = DataType::D; \
  }
TENSOROPS_DATA_TYPE_OF_(float, kFloat32);
TENSOROPS_DATA_TYPE_OF_(double, kFloat64);
TENSOROPS_DATA_TYPE_OF_(int8_t, kInt8);
TENSOROPS_DATA_TYPE_OF_(int16_t, kInt16);
TENSOROPS_DATA_TYPE_OF_(int32_t, kInt32);
TENSOROPS_DATA_TYPE_OF_(int64_t, kInt64);
TENSOROPS_DATA_TYPE_OF_(uint8_t, kUInt8);
TENSOROPS_DATA_TYPE_OF_(uint16_t, kUInt16);
TENSOROPS_DATA_TYPE_OF_(uint32_t, kUInt32);
TENSOROPS_DATA_TYPE_OF_(uint64_t, kUInt64);
TENSOROPS_DATA_TYPE_OF_(bool, kBool);
TENSOROPS_DATA_TYPE_OF_(std::complex<float>, kComplex64);
TENSOROPS_DATA_TYPE_OF_(std::complex<double>, kComplex128);
#undef TENSOROPS_DATA_TYPE_OF_

class TENSOROPS_EXPORT Tensor {
 public:
  // An invalid tensor (dtype kInvalid); calls reject it.
  Tensor();

  // Owning, from values of a C++ element type (see DataTypeOf) and a
  // row-major shape; `shape` {} is a scalar. Calls check that
  // values.size() equals the product of `shape` (see Validate).
  template <typename T, typename = std::enable_if_t<!std::is_same_v<T, bool>>>
  Tensor(const std::vector<T>& values, std::vector<int64_t> shape)
      : Tensor(DataTypeOf<T>::value, std::move(shape), values.data(),
               static_cast<int64_t>(values.size())) {}
  // BOOL (std::vector<bool> is bit-packed, hence its own overload).
  Tensor(const std::vector<bool>& values, std::vector<int64_t> shape);
  // STRING.
  Tensor(std::vector<std::string> values, std::vector<int64_t> shape);
  // One-dimensional, shape {values.size()}.
  template <typename T>
  explicit Tensor(const std::vector<T>& values)
      : Tensor(values, std::vector<int64_t>{static_cast<int64_t>(values.size())}) {}

  // A scalar (shape {}).
  template <typename T>
  static Tensor Scalar(T value) {
    return Tensor(std::vector<T>{std::move(value)}, std::vector<int64_t>{});
  }

  // A view of `data` (NumElements(shape) elements of `dtype`, packed
  // little-endian; not STRING): no copy. See the file comment for lifetime.
  static Tensor View(DataType dtype, std::vector<int64_t> shape, const void* data);
  template <typename T>
  static Tensor View(const T* data, std::vector<int64_t> shape) {
    return View(DataTypeOf<T>::value, std::move(shape), data);
  }
  // An owning copy of `data` (as View, but copied).
  static Tensor Copy(DataType dtype, std::vector<int64_t> shape, const void* data);

  // FLOAT16 / BFLOAT16 / FLOAT8_E4M3 / FLOAT8_E5M2 from their bit patterns.
  static Tensor FromBits(DataType dtype, const std::vector<uint16_t>& bits,
                         std::vector<int64_t> shape);
  static Tensor FromBits(DataType dtype, const std::vector<uint8_t>& bits,
                         std::vector<int64_t> shape);
  // Any floating type (FLOAT32/64, FLOAT16, BFLOAT16, FLOAT8_*) from floats,
  // rounded to nearest even (E4M3: out of range -> NaN).
  static Tensor FromFloats(DataType dtype, const std::vector<float>& values,
                           std::vector<int64_t> shape);

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  // Product of the shape (1 for a scalar).
  int64_t num_elements() const;
  // True if this tensor views caller memory.
  bool is_view() const { return is_view_; }

  // OK if the dtype is valid, no dim is negative and the element count
  // matches the shape; otherwise INVALID_ARGUMENT saying what is wrong.
  absl::Status Validate() const;

  // Packed little-endian elements (not STRING: empty).
  absl::Span<const char> bytes() const {
    return absl::Span<const char>(static_cast<const char*>(data_), num_bytes_);
  }
  // STRING elements (other types: empty).
  absl::Span<const std::string> strings() const;

  // True if T is the storage type of dtype(): its DataTypeOf, or uint16_t
  // for FLOAT16/BFLOAT16, uint8_t for FLOAT8_*, std::string for STRING.
  template <typename T>
  bool holds() const {
    if constexpr (std::is_same_v<T, std::string>) {
      return dtype_ == DataType::kString;
    } else if constexpr (std::is_same_v<T, uint16_t>) {
      return dtype_ == DataType::kUInt16 || dtype_ == DataType::kFloat16 ||
             dtype_ == DataType::kBFloat16;
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      return dtype_ == DataType::kUInt8 || dtype_ == DataType::kFloat8E4M3 ||
             dtype_ == DataType::kFloat8E5M2;
    } else {
      return dtype_ == DataTypeOf<T>::value;
    }
  }

  // The elements as T, without a copy; empty if !holds<T>().
  template <typename T>
  absl::Span<const T> values() const {
    static_assert(!std::is_same_v<T, std::string>, "use strings()");
    if (!holds<T>()) return {};
    return absl::Span<const T>(static_cast<const T*>(data_),
                               static_cast<size_t>(num_bytes_) / sizeof(T));
  }
  // The elements as a vector of T; INVALID_ARGUMENT if !holds<T>().
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const {
    if (!holds<T>()) return TypeMismatch(DataTypeOf<T>::value);
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<bool> out(num_bytes_);
      const auto* p = static_cast<const unsigned char*>(data_);
      for (int64_t i = 0; i < num_bytes_; ++i) out[i] = p[i] != 0;
      return out;
    } else {
      auto v = values<T>();
      return std::vector<T>(v.begin(), v.end());
    }
  }
  // Floating elements widened to float (FLOAT32, FLOAT16, BFLOAT16,
  // FLOAT8_*: exact; FLOAT64: rounded); INVALID_ARGUMENT for other types.
  absl::StatusOr<std::vector<float>> ToFloats() const;

  // Human-readable summary, e.g. "INT32[4,3]".
  std::string DebugString() const;

  // Same dtype, shape and element bits (views and owners compare alike).
  friend bool operator==(const Tensor& a, const Tensor& b) { return a.Equals(b); }
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !a.Equals(b); }

 private:
  Tensor(DataType dtype, std::vector<int64_t> shape, const void* values, int64_t count);
  absl::Status TypeMismatch(DataType wanted) const;
  bool Equals(const Tensor& other) const;
  friend class TensorAccess;  // for the client's wire conversion

  DataType dtype_ = DataType::kInvalid;
  std::vector<int64_t> shape_;
  const void* data_ = nullptr;  // owned_ data or caller memory
  int64_t num_bytes_ = 0;
  bool is_view_ = false;
  std::shared_ptr<const void> owned_;                        // non-STRING: keeps data_
  std::shared_ptr<const std::vector<std::string>> strings_;  // STRING
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_TENSOR_H_
