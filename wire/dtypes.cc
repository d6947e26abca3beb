#include "wire/dtypes.h"

#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace tensorops {
namespace {

// Indexed by the enum value; entry 0 is the invalid type.
constexpr std::array<DTypeRow, kNumDTypes + 1> kRows = {{
    {DType::kInvalid, v1::DATA_TYPE_UNSPECIFIED, nullptr, nullptr, 0},
    {DType::kFloat32, v1::DATA_TYPE_FLOAT32, "FP32", "fp32_contents", 4},
    {DType::kFloat64, v1::DATA_TYPE_FLOAT64, "FP64", "fp64_contents", 8},
    {DType::kFloat16, v1::DATA_TYPE_FLOAT16, "FP16", nullptr, 2},
    {DType::kBFloat16, v1::DATA_TYPE_BFLOAT16, "BF16", nullptr, 2},
    {DType::kInt8, v1::DATA_TYPE_INT8, "INT8", "int_contents", 1},
    {DType::kInt16, v1::DATA_TYPE_INT16, "INT16", "int_contents", 2},
    {DType::kInt32, v1::DATA_TYPE_INT32, "INT32", "int_contents", 4},
    {DType::kInt64, v1::DATA_TYPE_INT64, "INT64", "int64_contents", 8},
    {DType::kUInt8, v1::DATA_TYPE_UINT8, "UINT8", "uint_contents", 1},
    {DType::kUInt16, v1::DATA_TYPE_UINT16, "UINT16", "uint_contents", 2},
    {DType::kUInt32, v1::DATA_TYPE_UINT32, "UINT32", "uint_contents", 4},
    {DType::kUInt64, v1::DATA_TYPE_UINT64, "UINT64", "uint64_contents", 8},
    {DType::kBool, v1::DATA_TYPE_BOOL, "BOOL", "bool_contents", 1},
    {DType::kString, v1::DATA_TYPE_STRING, "BYTES", "bytes_contents", 0},
    {DType::kComplex64, v1::DATA_TYPE_COMPLEX64, nullptr, nullptr, 8},
    {DType::kComplex128, v1::DATA_TYPE_COMPLEX128, nullptr, nullptr, 16},
    {DType::kFloat8E4M3, v1::DATA_TYPE_FLOAT8_E4M3, nullptr, nullptr, 1},
    {DType::kFloat8E5M2, v1::DATA_TYPE_FLOAT8_E5M2, nullptr, nullptr, 1},
}};

constexpr bool RowsMatchEnums() {
  for (int i = 0; i <= kNumDTypes; ++i) {
    if (static_cast<int>(kRows[i].dtype) != i || static_cast<int>(kRows[i].proto) != i) {
      return false;
    }
  }
  return true;
}
static_assert(RowsMatchEnums(), "kRows must be indexed by DType, numbered like v1::DataType");

}  // namespace

const DTypeRow& GetDTypeRow(DType dtype) {
  return IsValidDType(dtype) ? kRows[static_cast<int>(dtype)] : kRows[0];
}

absl::Span<const DTypeRow> DTypeRows() { return absl::MakeConstSpan(kRows).subspan(1); }

DType DTypeFromOip(absl::string_view datatype) {
  for (const DTypeRow& row : DTypeRows()) {
    if (row.oip != nullptr && datatype == row.oip) return row.dtype;
  }
  return DType::kInvalid;
}

const std::string& OipDatatypeList() {
  static const std::string* const list = [] {
    std::vector<absl::string_view> names;
    for (const DTypeRow& row : DTypeRows()) {
      if (row.oip != nullptr) names.push_back(row.oip);
    }
    return new std::string(absl::StrJoin(names, ", "));
  }();
  return *list;
}

}  // namespace tensorops
