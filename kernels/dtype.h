// Element types: the 18 of the wire contract, described by what data movement
// needs (storage width) and what validation needs (class, name).
//
// Thread-safety: everything here is immutable and safe to use from any thread.
#ifndef TENSOROPS_KERNELS_DTYPE_H_
#define TENSOROPS_KERNELS_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tensorops {

// Numbered like tensorops.v1.DataType so the codec's mapping is the identity;
// the codec still maps explicitly, so kernels never depend on the proto.
enum class DType : int {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kUInt8 = 9,
  kUInt16 = 10,
  kUInt32 = 11,
  kUInt64 = 12,
  kBool = 13,
  kString = 14,
  kComplex64 = 15,
  kComplex128 = 16,
  kFloat8E4M3 = 17,  // OCP/ONNX E4M3FN: no infinities, 0x7F/0xFF are NaN.
  kFloat8E5M2 = 18,
};

inline constexpr int kNumDTypes = 18;

enum class DTypeClass { kFloat, kSignedInt, kUnsignedInt, kBool, kString, kComplex };

// A STRING element inside a kernel buffer. Kernels move these 16-byte
// references, never the string bytes; the codec resolves them on the way out.
// The referenced bytes belong to whoever owns the input (the request).
struct StringRef {
  const char* data;
  size_t size;
};
static_assert(sizeof(StringRef) == 16, "STRING elements use the 16-byte kernel path");

struct DTypeInfo {
  DType dtype;
  const char* name;  // "FLOAT32", as in DATA_TYPE_FLOAT32 without the prefix.
  int64_t width;     // bytes per element in a kernel buffer (STRING: sizeof(StringRef)).
  DTypeClass cls;
};

// True for the 18 valid values (not kInvalid).
bool IsValidDType(DType dtype);
// Info for a valid dtype; for anything else an entry named "INVALID" of width 0.
const DTypeInfo& GetDTypeInfo(DType dtype);
inline int64_t ElementWidth(DType dtype) { return GetDTypeInfo(dtype).width; }
inline absl::string_view DTypeName(DType dtype) { return GetDTypeInfo(dtype).name; }
// All 18 valid dtypes in enum order.
absl::Span<const DType> AllDTypes();

bool IsIntegerDType(DType dtype);   // INT8..INT64, UINT8..UINT64
bool IsFloatingDType(DType dtype);  // FLOAT16/32/64, BFLOAT16, FLOAT8_*

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_DTYPE_H_
