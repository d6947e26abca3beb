#include "kernels/dtype.h"

#include <array>

namespace tensorops {
namespace {

constexpr DTypeInfo kInvalidInfo{DType::kInvalid, "INVALID", 0, DTypeClass::kFloat};

// Indexed by the enum value; entry 0 is the invalid type.
constexpr std::array<DTypeInfo, kNumDTypes + 1> kInfos = {{
    kInvalidInfo,
    {DType::kFloat32, "FLOAT32", 4, DTypeClass::kFloat},
    {DType::kFloat64, "FLOAT64", 8, DTypeClass::kFloat},
    {DType::kFloat16, "FLOAT16", 2, DTypeClass::kFloat},
    {DType::kBFloat16, "BFLOAT16", 2, DTypeClass::kFloat},
    {DType::kInt8, "INT8", 1, DTypeClass::kSignedInt},
    {DType::kInt16, "INT16", 2, DTypeClass::kSignedInt},
    {DType::kInt32, "INT32", 4, DTypeClass::kSignedInt},
    {DType::kInt64, "INT64", 8, DTypeClass::kSignedInt},
    {DType::kUInt8, "UINT8", 1, DTypeClass::kUnsignedInt},
    {DType::kUInt16, "UINT16", 2, DTypeClass::kUnsignedInt},
    {DType::kUInt32, "UINT32", 4, DTypeClass::kUnsignedInt},
    {DType::kUInt64, "UINT64", 8, DTypeClass::kUnsignedInt},
    {DType::kBool, "BOOL", 1, DTypeClass::kBool},
    {DType::kString, "STRING", 16, DTypeClass::kString},
    {DType::kComplex64, "COMPLEX64", 8, DTypeClass::kComplex},
    {DType::kComplex128, "COMPLEX128", 16, DTypeClass::kComplex},
    {DType::kFloat8E4M3, "FLOAT8_E4M3", 1, DTypeClass::kFloat},
    {DType::kFloat8E5M2, "FLOAT8_E5M2", 1, DTypeClass::kFloat},
}};

constexpr bool EntriesMatchEnum() {
  for (int i = 0; i <= kNumDTypes; ++i) {
    if (static_cast<int>(kInfos[i].dtype) != i) return false;
  }
  return true;
}
static_assert(EntriesMatchEnum(), "kInfos must be indexed by DType value");

constexpr std::array<DType, kNumDTypes> kAll = {
    DType::kFloat32,    DType::kFloat64,    DType::kFloat16,   DType::kBFloat16, DType::kInt8,
    DType::kInt16,      DType::kInt32,      DType::kInt64,     DType::kUInt8,    DType::kUInt16,
    DType::kUInt32,     DType::kUInt64,     DType::kBool,      DType::kString,   DType::kComplex64,
    DType::kComplex128, DType::kFloat8E4M3, DType::kFloat8E5M2};

}  // namespace

bool IsValidDType(DType dtype) {
  const int v = static_cast<int>(dtype);
  return v >= 1 && v <= kNumDTypes;
}

const DTypeInfo& GetDTypeInfo(DType dtype) {
  return IsValidDType(dtype) ? kInfos[static_cast<int>(dtype)] : kInfos[0];
}

absl::Span<const DType> AllDTypes() { return kAll; }

bool IsIntegerDType(DType dtype) {
  if (!IsValidDType(dtype)) return false;
  const DTypeClass c = GetDTypeInfo(dtype).cls;
  return c == DTypeClass::kSignedInt || c == DTypeClass::kUnsignedInt;
}

bool IsFloatingDType(DType dtype) {
  return IsValidDType(dtype) && GetDTypeInfo(dtype).cls == DTypeClass::kFloat;
}

}  // namespace tensorops
