#include "wire/tensor_codec.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "kernels/dtype.h"
#include "kernels/field_path.h"
#include "kernels/float_formats.h"
#include "kernels/huge_pages.h"
#include "kernels/shape.h"
#include "wire/dtypes.h"

// raw_data is packed little-endian and is used in place as the kernel buffer.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor_codec.cc assumes a little-endian host (raw_data is used in place)"
#endif

namespace tensorops {
namespace {

// The proto's data fields, in field-number order.
enum class Field {
  kRaw,
  kFloat,
  kDouble,
  kInt32,
  kInt64,
  kUInt32,
  kUInt64,
  kBool,
  kString,
};
constexpr int kNumFields = 9;

const char* FieldName(Field f) {
  switch (f) {
    case Field::kRaw:
      return "raw_data";
    case Field::kFloat:
      return "float_data";
    case Field::kDouble:
      return "double_data";
    case Field::kInt32:
      return "int32_data";
    case Field::kInt64:
      return "int64_data";
    case Field::kUInt32:
      return "uint32_data";
    case Field::kUInt64:
      return "uint64_data";
    case Field::kBool:
      return "bool_data";
    case Field::kString:
      return "string_data";
  }
  return "?";
}

// Number of entries (raw_data: bytes) in a field; a field counts as set when non-empty.
int64_t FieldSize(const v1::Tensor& p, Field f) {
  switch (f) {
    case Field::kRaw:
      return static_cast<int64_t>(p.raw_data().size());
    case Field::kFloat:
      return p.float_data_size();
    case Field::kDouble:
      return p.double_data_size();
    case Field::kInt32:
      return p.int32_data_size();
    case Field::kInt64:
      return p.int64_data_size();
    case Field::kUInt32:
      return p.uint32_data_size();
    case Field::kUInt64:
      return p.uint64_data_size();
    case Field::kBool:
      return p.bool_data_size();
    case Field::kString:
      return p.string_data_size();
  }
  return 0;
}

// The typed field that carries `dtype` (the proto's table).
Field TypedFieldFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kComplex64:
      return Field::kFloat;
    case DType::kFloat64:
    case DType::kComplex128:
      return Field::kDouble;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return Field::kInt32;
    case DType::kInt64:
      return Field::kInt64;
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
      return Field::kUInt32;
    case DType::kUInt64:
      return Field::kUInt64;
    case DType::kBool:
      return Field::kBool;
    case DType::kString:
    case DType::kInvalid:
      break;
  }
  return Field::kString;
}

bool IsComplex(DType dtype) { return dtype == DType::kComplex64 || dtype == DType::kComplex128; }

// A byte-copy of `n` elements of T (proto repeated fields store T packed).
template <typename T>
void CopyOut(const google::protobuf::RepeatedField<T>& field, int64_t n, char* dst) {
  if (n > 0) std::memcpy(dst, field.data(), static_cast<size_t>(n) * sizeof(T));
}

template <typename Narrow>
void NarrowFloats(const google::protobuf::RepeatedField<float>& field, Narrow (*conv)(float),
                  char* dst) {
  Narrow* out = reinterpret_cast<Narrow*>(dst);
  for (int i = 0; i < field.size(); ++i) out[i] = conv(field.Get(i));
}

// Fills `dst` (n elements of `dtype`) from the typed field. Counts already checked.
absl::Status DecodeTyped(const v1::Tensor& p, DType dtype, int64_t n, absl::string_view what,
                         char* dst) {
  switch (dtype) {
    case DType::kFloat32:
      CopyOut(p.float_data(), n, dst);  // bits, so NaN payloads and -0.0 survive
      return absl::OkStatus();
    case DType::kComplex64:
      CopyOut(p.float_data(), 2 * n, dst);
      return absl::OkStatus();
    case DType::kFloat64:
      CopyOut(p.double_data(), n, dst);
      return absl::OkStatus();
    case DType::kComplex128:
      CopyOut(p.double_data(), 2 * n, dst);
      return absl::OkStatus();
    case DType::kFloat16:
      NarrowFloats<uint16_t>(p.float_data(), &FloatToHalf, dst);
      return absl::OkStatus();
    case DType::kBFloat16:
      NarrowFloats<uint16_t>(p.float_data(), &FloatToBFloat16, dst);
      return absl::OkStatus();
    case DType::kFloat8E4M3:
      NarrowFloats<uint8_t>(p.float_data(), &FloatToFloat8E4M3, dst);
      return absl::OkStatus();
    case DType::kFloat8E5M2:
      NarrowFloats<uint8_t>(p.float_data(), &FloatToFloat8E5M2, dst);
      return absl::OkStatus();
    case DType::kInt8:
      return NarrowIntegers<int8_t>(p.int32_data(), dtype, what, FieldName(Field::kInt32), dst);
    case DType::kInt16:
      return NarrowIntegers<int16_t>(p.int32_data(), dtype, what, FieldName(Field::kInt32), dst);
    case DType::kInt32:
      CopyOut(p.int32_data(), n, dst);
      return absl::OkStatus();
    case DType::kInt64:
      CopyOut(p.int64_data(), n, dst);
      return absl::OkStatus();
    case DType::kUInt8:
      return NarrowIntegers<uint8_t>(p.uint32_data(), dtype, what, FieldName(Field::kUInt32), dst);
    case DType::kUInt16:
      return NarrowIntegers<uint16_t>(p.uint32_data(), dtype, what, FieldName(Field::kUInt32), dst);
    case DType::kUInt32:
      CopyOut(p.uint32_data(), n, dst);
      return absl::OkStatus();
    case DType::kUInt64:
      CopyOut(p.uint64_data(), n, dst);
      return absl::OkStatus();
    case DType::kBool: {
      uint8_t* out = reinterpret_cast<uint8_t*>(dst);
      for (int i = 0; i < p.bool_data_size(); ++i) out[i] = p.bool_data(i) ? 1 : 0;
      return absl::OkStatus();
    }
    case DType::kString: {
      StringRef* out = reinterpret_cast<StringRef*>(dst);
      for (int i = 0; i < p.string_data_size(); ++i) {
        const std::string& s = p.string_data(i);
        out[i] = StringRef{s.data(), s.size()};
      }
      return absl::OkStatus();
    }
    case DType::kInvalid:
      break;
  }
  return absl::InternalError("DecodeTyped: invalid dtype");
}

// Non-null and aligned for every element type: the buffer of an empty tensor.
alignas(16) const char kEmptyBuffer[16] = {};

std::string DTypeForMessage(v1::DataType d) {
  const std::string& name = v1::DataType_Name(d);
  if (name.empty()) return absl::StrCat(static_cast<int>(d));
  return absl::StrCat(name, " (", static_cast<int>(d), ")");
}

// Resizes a repeated field for `count` values and returns its storage.
template <typename T>
T* ResizeField(google::protobuf::RepeatedField<T>* field, int64_t count) {
  // Typed encodings are bounded by the 2 GiB message limit, so `count` fits int.
  field->Resize(static_cast<int>(count), T());
  return field->mutable_data();
}

template <typename T>
void EncodeCopy(const void* src, int64_t count, google::protobuf::RepeatedField<T>* field) {
  T* dst = ResizeField(field, count);
  if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(T));
}

template <typename Narrow, typename Wide>
void EncodeWiden(const void* src, int64_t count, google::protobuf::RepeatedField<Wide>* field) {
  Wide* dst = ResizeField(field, count);
  const Narrow* in = static_cast<const Narrow*>(src);
  for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<Wide>(in[i]);
}

template <typename Narrow>
void EncodeNarrowFloat(const void* src, int64_t count, float (*conv)(Narrow),
                       google::protobuf::RepeatedField<float>* field) {
  float* dst = ResizeField(field, count);
  const Narrow* in = static_cast<const Narrow*>(src);
  for (int64_t i = 0; i < count; ++i) dst[i] = conv(in[i]);
}

void EncodeTypedValues(const TensorView& t, int64_t n, v1::Tensor* proto) {
  const void* d = t.data;
  switch (t.dtype) {
    case DType::kFloat32:
      return EncodeCopy(d, n, proto->mutable_float_data());
    case DType::kComplex64:
      return EncodeCopy(d, 2 * n, proto->mutable_float_data());
    case DType::kFloat64:
      return EncodeCopy(d, n, proto->mutable_double_data());
    case DType::kComplex128:
      return EncodeCopy(d, 2 * n, proto->mutable_double_data());
    case DType::kFloat16:
      return EncodeNarrowFloat<uint16_t>(d, n, &HalfToFloat, proto->mutable_float_data());
    case DType::kBFloat16:
      return EncodeNarrowFloat<uint16_t>(d, n, &BFloat16ToFloat, proto->mutable_float_data());
    case DType::kFloat8E4M3:
      return EncodeNarrowFloat<uint8_t>(d, n, &Float8E4M3ToFloat, proto->mutable_float_data());
    case DType::kFloat8E5M2:
      return EncodeNarrowFloat<uint8_t>(d, n, &Float8E5M2ToFloat, proto->mutable_float_data());
    case DType::kInt8:
      return EncodeWiden<int8_t>(d, n, proto->mutable_int32_data());
    case DType::kInt16:
      return EncodeWiden<int16_t>(d, n, proto->mutable_int32_data());
    case DType::kInt32:
      return EncodeCopy(d, n, proto->mutable_int32_data());
    case DType::kInt64:
      return EncodeCopy(d, n, proto->mutable_int64_data());
    case DType::kUInt8:
      return EncodeWiden<uint8_t>(d, n, proto->mutable_uint32_data());
    case DType::kUInt16:
      return EncodeWiden<uint16_t>(d, n, proto->mutable_uint32_data());
    case DType::kUInt32:
      return EncodeCopy(d, n, proto->mutable_uint32_data());
    case DType::kUInt64:
      return EncodeCopy(d, n, proto->mutable_uint64_data());
    case DType::kBool: {
      bool* dst = ResizeField(proto->mutable_bool_data(), n);
      const uint8_t* in = static_cast<const uint8_t*>(d);
      for (int64_t i = 0; i < n; ++i) dst[i] = in[i] != 0;
      return;
    }
    case DType::kString:  // handled by the caller
    case DType::kInvalid:
      return;
  }
}

void SetDTypeAndShape(DType dtype, const Shape& shape, v1::Tensor* proto) {
  proto->Clear();
  proto->set_dtype(ToProtoDataType(dtype));
  proto->mutable_shape()->Reserve(static_cast<int>(shape.size()));
  for (int64_t d : shape) proto->add_shape(d);
}

}  // namespace

namespace {

// The request limits on one tensor: its elements and its bytes (a STRING
// tensor's values counted too). RESOURCE_EXHAUSTED naming the flag.
absl::Status CheckTensorLimits(const v1::Tensor& proto, DType dtype, absl::Span<const int64_t> dims,
                               int64_t num_bytes, absl::string_view what,
                               const RequestLimits& limits) {
  const int64_t n = num_bytes / ElementWidth(dtype);
  if (n > limits.max_tensor_elements) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " has ", n, " elements (shape ", ShapeToString(dims), "); the limit is ",
                     limits.max_tensor_elements, " (--max_tensor_elements)"));
  }
  int64_t bytes = num_bytes;
  bool over = bytes > limits.max_tensor_bytes;
  if (dtype == DType::kString && !over) {
    // Stops at the first string past the limit, so the sum never overflows.
    for (const std::string& s : proto.string_data()) {
      if (static_cast<int64_t>(s.size()) > limits.max_tensor_bytes - bytes) {
        over = true;
        bytes = limits.max_tensor_bytes + 1;  // reported as "N+ bytes"
        break;
      }
      bytes += static_cast<int64_t>(s.size());
    }
  }
  if (over) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " needs ", bytes, dtype == DType::kString ? "+" : "", " bytes (shape ",
                     ShapeToString(dims), " of ", DTypeName(dtype), "); the limit is ",
                     limits.max_tensor_bytes, " (--max_tensor_bytes)"));
  }
  return absl::OkStatus();
}

// The one data field the tensor sets; nullopt when none is set.
// INVALID_ARGUMENT when two are.
absl::StatusOr<std::optional<Field>> TheDataField(const v1::Tensor& proto, absl::string_view what) {
  std::optional<Field> set;
  for (int i = 0; i < kNumFields; ++i) {
    const Field f = static_cast<Field>(i);
    if (FieldSize(proto, f) == 0) continue;
    if (set.has_value()) {
      return InvalidArgumentAt(absl::StrCat(".", FieldName(f)),
                               absl::StrCat(what, " sets both ", FieldName(*set), " and ",
                                            FieldName(f), "; set exactly one data field"));
    }
    set = f;
  }
  return set;
}

// raw_data, viewed in place (whatever its alignment: kernels and readers
// load elements with memcpy or unaligned vector loads, never through typed
// pointers) after its size and, for BOOL, its values are checked.
absl::Status ViewRawData(const v1::Tensor& proto, DType dtype, absl::Span<const int64_t> dims,
                         int64_t num_bytes, absl::string_view what, DecodedTensor* out) {
  if (dtype == DType::kString) {
    return InvalidArgumentAt(
        ".raw_data", absl::StrCat(what, ".raw_data cannot carry STRING values; use string_data"));
  }
  const std::string& raw = proto.raw_data();
  if (static_cast<int64_t>(raw.size()) != num_bytes) {
    return InvalidArgumentAt(
        ".raw_data",
        absl::StrCat(what, ".raw_data has ", raw.size(), " bytes but shape ", ShapeToString(dims),
                     " of ", DTypeName(dtype), " needs ", num_bytes));
  }
  if (dtype == DType::kBool) {
    if (const int64_t i = FindInvalidBool(raw); i >= 0) {
      return InvalidArgumentAt(".raw_data", absl::StrCat(what, ".raw_data[", i,
                                                         "] = ", int{static_cast<uint8_t>(raw[i])},
                                                         " is not a valid BOOL (0 or 1)"));
    }
  }
  out->encoding = Encoding::kRaw;
  out->view.data = raw.data();
  return absl::OkStatus();
}

// A typed field (`set`), checked against the type's own field and the
// shape's element count, decoded into out->storage.
absl::Status DecodeTypedField(const v1::Tensor& proto, DType dtype, Field set,
                              absl::Span<const int64_t> dims, int64_t num_bytes,
                              absl::string_view what, DecodedTensor* out) {
  const Field typed = TypedFieldFor(dtype);
  if (set != typed) {
    return InvalidArgumentAt(
        absl::StrCat(".", FieldName(set)),
        absl::StrCat(what, ".", FieldName(set), " cannot carry ", DTypeName(dtype), " values; use ",
                     FieldName(typed), dtype == DType::kString ? "" : " or raw_data"));
  }
  const int64_t n = num_bytes / ElementWidth(dtype);
  const int64_t per_element = IsComplex(dtype) ? 2 : 1;
  const int64_t want = n * per_element;  // cannot overflow: n * width fits int64
  const int64_t have = FieldSize(proto, set);
  if (have != want) {
    return InvalidArgumentAt(
        absl::StrCat(".", FieldName(set)),
        absl::StrCat(what, ".", FieldName(set), " has ", have, " values but shape ",
                     ShapeToString(dims),
                     per_element == 2 ? absl::StrCat(" of ", DTypeName(dtype), " needs ", want,
                                                     " (2 per element: re, im)")
                                      : absl::StrCat(" needs ", want)));
  }
  out->encoding = Encoding::kTyped;
  out->storage.reset(new char[num_bytes > 0 ? num_bytes : 1]);
  absl::Status st = DecodeTyped(proto, dtype, n, what, out->storage.get());
  if (!st.ok()) return st;
  out->view.data = out->storage.get();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedTensor> DecodeTensor(const v1::Tensor& proto, absl::string_view what,
                                           const RequestLimits* limits) {
  const DType dtype = FromProtoDataType(proto.dtype());
  if (!IsValidDType(dtype)) {
    return InvalidArgumentAt(".dtype",
                             absl::StrCat(what, ".dtype: ", DTypeForMessage(proto.dtype()),
                                          " is not a valid data type"));
  }
  if (limits != nullptr && proto.shape_size() > limits->max_rank) {
    return InvalidArgumentAt(
        ".shape", absl::StrCat(what, ".shape has rank ", proto.shape_size(), "; the limit is ",
                               limits->max_rank, " (--max_rank)"));
  }
  const int64_t width = ElementWidth(dtype);
  const absl::Span<const int64_t> dims(proto.shape().data(),
                                       static_cast<size_t>(proto.shape_size()));
  // CheckedByteSize also rejects negative dims and element-count overflow.
  const absl::StatusOr<int64_t> num_bytes =
      AtField(CheckedByteSize(dims, width, absl::StrCat(what, ".shape")), ".shape");
  if (!num_bytes.ok()) return num_bytes.status();
  if (limits != nullptr) {
    if (absl::Status st = CheckTensorLimits(proto, dtype, dims, *num_bytes, what, *limits);
        !st.ok()) {
      return st;
    }
  }
  absl::StatusOr<std::optional<Field>> set = TheDataField(proto, what);
  if (!set.ok()) return set.status();

  DecodedTensor out;
  out.view.dtype = dtype;
  out.view.shape.assign(dims.begin(), dims.end());
  absl::Status st;
  if (!set->has_value()) {
    if (*num_bytes != 0) {
      return InvalidArgumentAt("", absl::StrCat(what, " has no data: set ",
                                                dtype == DType::kString ? "" : "raw_data or ",
                                                FieldName(TypedFieldFor(dtype))));
    }
    out.encoding = Encoding::kRaw;
    out.view.data = kEmptyBuffer;
  } else if (**set == Field::kRaw) {
    st = ViewRawData(proto, dtype, dims, *num_bytes, what, &out);
  } else {
    st = DecodeTypedField(proto, dtype, **set, dims, *num_bytes, what, &out);
  }
  if (!st.ok()) return st;
  return out;
}

std::string TensorFieldPath(const v1::Tensor& proto, absl::string_view op_path) {
  absl::string_view rest = op_path;
  if (!ConsumeDataPath(&rest)) return std::string(op_path);
  std::optional<Field> set;
  for (int i = 0; i < kNumFields && !set.has_value(); ++i) {
    if (FieldSize(proto, static_cast<Field>(i)) > 0) set = static_cast<Field>(i);
  }
  const DType dtype = FromProtoDataType(proto.dtype());
  const Field field = set.value_or(TypedFieldFor(dtype));
  // raw_data is one bytes field: its elements are no fields of their own.
  if (field == Field::kRaw || rest.empty()) return absl::StrCat(".", FieldName(field));
  int64_t k = 0;
  absl::string_view after;
  if (!SplitLeadingIndex(rest, &k, &after)) {
    return absl::StrCat(".", FieldName(field));
  }
  return absl::StrCat(".", FieldName(field), "[", IsComplex(dtype) ? 2 * k : k, "]", after);
}

int64_t DecodedBytes(const TensorView& t) {
  const int64_t n = t.num_elements();
  int64_t bytes = n * ElementWidth(t.dtype);
  if (t.dtype == DType::kString) {
    const StringRef* refs = t.data_as<StringRef>();
    for (int64_t i = 0; i < n; ++i) bytes += static_cast<int64_t>(refs[i].size);
  }
  return bytes;
}

void EncodeTensor(const TensorView& t, Encoding encoding, v1::Tensor* proto) {
  SetDTypeAndShape(t.dtype, t.shape, proto);
  const int64_t n = t.num_elements();
  if (t.dtype == DType::kString) {
    auto* strings = proto->mutable_string_data();
    strings->Reserve(static_cast<int>(n));
    const StringRef* refs = t.data_as<StringRef>();
    for (int64_t i = 0; i < n; ++i) strings->Add()->assign(refs[i].data, refs[i].size);
    return;
  }
  if (encoding == Encoding::kRaw) {
    const int64_t bytes = n * ElementWidth(t.dtype);
    if (bytes > 0) proto->set_raw_data(t.data, static_cast<size_t>(bytes));
    return;
  }
  EncodeTypedValues(t, n, proto);
}

void* AllocateRawOutput(DType dtype, const Shape& shape, v1::Tensor* proto) {
  SetDTypeAndShape(dtype, shape, proto);
  std::string* raw = proto->mutable_raw_data();
  const int64_t bytes = NumElements(shape) * ElementWidth(dtype);
  raw->reserve(static_cast<size_t>(bytes));
  AdviseHugePages(raw->data(), bytes);  // before resize() first touches it
  raw->resize(static_cast<size_t>(bytes));
  // &(*raw)[0] is valid for an empty string too (it is the terminating NUL).
  return &(*raw)[0];
}

int64_t FindInvalidBool(absl::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (static_cast<uint8_t>(bytes[i]) > 1) return static_cast<int64_t>(i);
  }
  return -1;
}

v1::DataType ToProtoDataType(DType dtype) { return GetDTypeRow(dtype).proto; }

DType FromProtoDataType(v1::DataType dtype) {
  // Values beyond the enum (proto3 keeps them) and DATA_TYPE_UNSPECIFIED: kInvalid.
  const DType d = static_cast<DType>(static_cast<int>(dtype));
  return IsValidDType(d) ? d : DType::kInvalid;
}

}  // namespace tensorops
