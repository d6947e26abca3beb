// Codec between the wire's tensorops.v1.Tensor and the kernels' TensorView.
//
// Decoding checks everything a caller can get wrong (dtype, shape, which data
// field, element count, value ranges) and names the field in each
// INVALID_ARGUMENT, e.g. "inputs[0].int32_data[3] = 300 is out of range
// [-128, 127] for INT8". raw_data is used in place (no copy); typed fields are
// converted into an owned little-endian buffer.
//
// Thread-safety: stateless functions; safe from any thread.
#ifndef TENSOROPS_WIRE_TENSOR_CODEC_H_
#define TENSOROPS_WIRE_TENSOR_CODEC_H_

#include <cstdint>
#include <limits>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/field_path.h"
#include "kernels/tensor.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/limits.h"

namespace tensorops {

// Which kind of field carried a tensor's elements; the reply mirrors the data input's.
enum class Encoding { kRaw, kTyped };

// A decoded request tensor. `view.data` points into the proto's raw_data (the
// proto must outlive this) or into `storage`. Movable; the view stays valid
// across moves.
struct DecodedTensor {
  TensorView view;
  Encoding encoding = Encoding::kRaw;
  std::unique_ptr<char[]> storage;
  // STRING only: the StringRef elements point into the proto's string_data.
};

// `what` prefixes every message, e.g. "inputs[0]".
// A tensor with zero elements may set no data field at all (then kRaw).
// With `limits`, a rank above max_rank is INVALID_ARGUMENT and a tensor above
// max_tensor_elements or max_tensor_bytes is RESOURCE_EXHAUSTED (checked
// before anything is allocated); each message names the limit and its flag.
// An INVALID_ARGUMENT's field path (kernels/field_path.h) is relative to the
// tensor (".shape[1]", ".int32_data", "" for the tensor as a whole): the
// caller, which knows where the tensor sits in its request, prefixes it.
absl::StatusOr<DecodedTensor> DecodeTensor(const v1::Tensor& proto, absl::string_view what,
                                           const RequestLimits* limits = nullptr);

// The field of `proto` that a tensor-relative path in the kernels' op
// vocabulary (kernels/field_path.h) names: ".data" and ".data[k]" become the
// data field the tensor sets (".raw_data", whose bytes are no fields of their
// own; ".int64_data[k]"; ".float_data[2k]" for COMPLEX64's re, im pairs);
// ".dtype", ".shape[d]" and "" stay as they are.
std::string TensorFieldPath(const v1::Tensor& proto, absl::string_view op_path);

// Bytes `t` counts against the limits: elements x width, plus the characters
// of STRING elements.
int64_t DecodedBytes(const TensorView& t);

// Writes `t` (dtype, shape, elements) into `*proto` using `encoding`.
// STRING always uses string_data. FLOAT16/BFLOAT16/FLOAT8 in typed form are
// widened to float exactly.
void EncodeTensor(const TensorView& t, Encoding encoding, v1::Tensor* proto);

// For the raw encoding without an intermediate buffer: sets dtype and shape,
// sizes raw_data for (dtype, shape) and returns its bytes for a kernel to
// fill. Not for STRING.
void* AllocateRawOutput(DType dtype, const Shape& shape, v1::Tensor* proto);

// Index of the first byte of `bytes` (BOOL elements) that is neither 0 nor 1,
// or -1 if all are valid. Execute and ExecuteStream both reject such bytes.
int64_t FindInvalidBool(absl::string_view bytes);

// Narrows int32/uint32 values of a typed field into a 1- or 2-byte integer
// type at `dst`, rejecting the first out-of-range value by index:
// "<what>.<field_name>[i] = v is out of range [lo, hi] for INT8". Shared by
// the native codec and the Open Inference Protocol's typed contents.
template <typename Narrow, typename Wide>
absl::Status NarrowIntegers(const google::protobuf::RepeatedField<Wide>& field, DType dtype,
                            absl::string_view what, absl::string_view field_name, char* dst) {
  constexpr int64_t kLo = std::numeric_limits<Narrow>::min();
  constexpr int64_t kHi = std::numeric_limits<Narrow>::max();
  Narrow* out = reinterpret_cast<Narrow*>(dst);
  for (int i = 0; i < field.size(); ++i) {
    const int64_t v = field.Get(i);
    if (v < kLo || v > kHi) {
      return InvalidArgumentAt(
          absl::StrCat(".", field_name, "[", i, "]"),
          absl::StrCat(what, ".", field_name, "[", i, "] = ", v, " is out of range [", kLo, ", ",
                       kHi, "] for ", DTypeName(dtype)));
    }
    out[i] = static_cast<Narrow>(v);
  }
  return absl::OkStatus();
}

// DType <-> wire enum. ToProtoDataType(kInvalid) is DATA_TYPE_UNSPECIFIED.
v1::DataType ToProtoDataType(DType dtype);
DType FromProtoDataType(v1::DataType dtype);  // kInvalid for unknown values

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_TENSOR_CODEC_H_
