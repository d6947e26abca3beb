// The one dtype table (wire/dtypes.h) against the enums and names it joins.
#include "wire/dtypes.h"

#include <string>

#include "gtest/gtest.h"
#include "wire/tensor_codec.h"

namespace tensorops {
namespace {

TEST(DTypesTest, OneRowPerTypeAgreeingWithEveryEnum) {
  ASSERT_EQ(DTypeRows().size(), static_cast<size_t>(kNumDTypes));
  int oip = 0;
  for (const DTypeRow& row : DTypeRows()) {
    const std::string name(DTypeName(row.dtype));
    EXPECT_TRUE(AcceptedByTensorOps(row.dtype)) << name;
    // The proto enum's name is DATA_TYPE_ + the kernels' name.
    EXPECT_EQ(v1::DataType_Name(row.proto), "DATA_TYPE_" + name);
    EXPECT_EQ(ToProtoDataType(row.dtype), row.proto);
    EXPECT_EQ(FromProtoDataType(row.proto), row.dtype);
    EXPECT_EQ(row.sdk_width, row.dtype == DType::kString ? 0 : ElementWidth(row.dtype)) << name;
    if (row.oip != nullptr) {
      ++oip;
      EXPECT_TRUE(AcceptedByOip(row.dtype));
      EXPECT_EQ(DTypeFromOip(row.oip), row.dtype) << row.oip;
    } else {
      EXPECT_EQ(row.oip_contents, nullptr) << name;
    }
  }
  EXPECT_EQ(oip, 14);                                       // every OIP datatype
  EXPECT_EQ(TypedContentsField(DType::kFloat16), nullptr);  // raw only
  EXPECT_STREQ(TypedContentsField(DType::kInt8), "int_contents");
  EXPECT_EQ(GetDTypeRow(DType::kInvalid).proto, v1::DATA_TYPE_UNSPECIFIED);
  EXPECT_EQ(FromProtoDataType(static_cast<v1::DataType>(99)), DType::kInvalid);
  EXPECT_EQ(DTypeFromOip("fp32"), DType::kInvalid);
  // Error messages list exactly the datatypes DTypeFromOip accepts.
  EXPECT_EQ(OipDatatypeList(),
            "FP32, FP64, FP16, BF16, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, "
            "BOOL, BYTES");
}

}  // namespace
}  // namespace tensorops
