#include "wire/tensor_codec.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "kernels/float_formats.h"
#include "tests/harness/raw_bytes.h"

namespace tensorops {
namespace {

using ::tensorops::testing::Pack;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- helpers

float F(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double D(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

std::string ViewBytes(const TensorView& v) {
  return std::string(static_cast<const char*>(v.data), static_cast<size_t>(v.num_bytes()));
}

// Names of the data fields (3..11) set in `t`, via reflection.
std::vector<std::string> DataFieldsSet(const v1::Tensor& t) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  t.GetReflection()->ListFields(t, &fields);
  std::vector<std::string> names;
  for (const auto* f : fields) {
    if (f->number() >= 3) names.push_back(f->name());
  }
  return names;
}

// Serialises and parses: what actually crosses the wire.
v1::Tensor OverTheWire(const v1::Tensor& t) {
  v1::Tensor out;
  EXPECT_TRUE(out.ParseFromString(t.SerializeAsString()));
  return out;
}

v1::Tensor MakeTensor(v1::DataType dtype, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  return t;
}

// Six elements of each non-STRING dtype, packed little-endian, chosen to catch
// lost bits: NaN payloads (quiet and signalling, both signs), -0.0,
// subnormals, infinities, integer extremes.
std::string SampleBytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return Pack<uint32_t>(
          {0x7FC00001u, 0x7F800001u, 0x80000000u, 0xFF812345u, 0x00000001u, 0x3F800000u});
    case DType::kFloat64:
      return Pack<uint64_t>({0x7FF8000000000001ull, 0x7FF0000000000001ull, 0x8000000000000000ull,
                             0xFFF0000000000ABCull, 0x0000000000000001ull, 0xBFF0000000000000ull});
    case DType::kFloat16:
      return Pack<uint16_t>({0x7E01, 0x7C01, 0x8000, 0xFDFF, 0x7C00, 0x0001});
    case DType::kBFloat16:
      return Pack<uint16_t>({0x7FC1, 0x7F81, 0x8000, 0xFF81, 0xFF80, 0x0001});
    case DType::kFloat8E4M3:
      return Pack<uint8_t>({0x7F, 0xFF, 0x80, 0x7E, 0x01, 0x78});
    case DType::kFloat8E5M2:
      return Pack<uint8_t>({0x7D, 0xFE, 0x80, 0x7B, 0x7C, 0x01});
    case DType::kInt8:
      return Pack<int8_t>({-128, 127, 0, -1, 1, 42});
    case DType::kInt16:
      return Pack<int16_t>({-32768, 32767, 0, -1, 1, 1000});
    case DType::kInt32:
      return Pack<int32_t>({INT32_MIN, INT32_MAX, 0, -1, 1, 123456});
    case DType::kInt64:
      return Pack<int64_t>({INT64_MIN, INT64_MAX, 0, -1, 1, 1ll << 40});
    case DType::kUInt8:
      return Pack<uint8_t>({0, 255, 1, 128, 127, 42});
    case DType::kUInt16:
      return Pack<uint16_t>({0, 65535, 1, 32768, 32767, 42});
    case DType::kUInt32:
      return Pack<uint32_t>({0, UINT32_MAX, 1, 1u << 31, 42, 7});
    case DType::kUInt64:
      return Pack<uint64_t>({0, UINT64_MAX, 1, 1ull << 63, 42, 7});
    case DType::kBool:
      return Pack<uint8_t>({0, 1, 1, 0, 0, 1});
    case DType::kComplex64:
      return Pack<uint32_t>({0x7FC00001u, 0x80000000u, 0x7F800001u, 0x3F800000u, 0x80000000u,
                             0x00000000u, 0xFF812345u, 0x00000001u, 0x40000000u, 0xC0000000u,
                             0x7F800000u, 0xFF800000u});
    case DType::kComplex128:
      return Pack<uint64_t>({0x7FF8000000000001ull, 0x8000000000000000ull, 0x7FF0000000000001ull,
                             0x3FF0000000000000ull, 0x0ull, 0x8000000000000000ull, 0x1ull, 0x2ull,
                             0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x4000000000000000ull,
                             0xC000000000000000ull});
    case DType::kString:
    case DType::kInvalid:
      break;
  }
  return "";
}

// The typed field each dtype travels in.
const char* TypedFieldName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kComplex64:
      return "float_data";
    case DType::kFloat64:
    case DType::kComplex128:
      return "double_data";
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return "int32_data";
    case DType::kInt64:
      return "int64_data";
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
      return "uint32_data";
    case DType::kUInt64:
      return "uint64_data";
    case DType::kBool:
      return "bool_data";
    default:
      return "string_data";
  }
}

struct ShapeCase {
  std::vector<int64_t> shape;
  int64_t n;
};

const ShapeCase kShapes[] = {
    {{2, 3}, 6}, {{6}, 6}, {{}, 1}, {{1, 1, 1}, 1}, {{3, 1, 2}, 6},
};

// ---------------------------------------------------------------- dtype mapping

TEST(TensorCodecTest, DTypeMappingIsExplicitAndComplete) {
  for (DType d : AllDTypes()) {
    SCOPED_TRACE(DTypeName(d));
    const v1::DataType p = ToProtoDataType(d);
    EXPECT_EQ(v1::DataType_Name(p), absl::StrCat("DATA_TYPE_", DTypeName(d)));
    EXPECT_EQ(FromProtoDataType(p), d);
  }
  EXPECT_EQ(ToProtoDataType(DType::kInvalid), v1::DATA_TYPE_UNSPECIFIED);
  EXPECT_EQ(FromProtoDataType(v1::DATA_TYPE_UNSPECIFIED), DType::kInvalid);
  EXPECT_EQ(FromProtoDataType(static_cast<v1::DataType>(99)), DType::kInvalid);
  EXPECT_EQ(FromProtoDataType(static_cast<v1::DataType>(-1)), DType::kInvalid);
}

// ---------------------------------------------------------------- round trips

// raw in -> decode (zero copy) -> encode raw and typed -> decode typed: bits unchanged.
TEST(TensorCodecTest, RoundTripsEveryDTypeInBothEncodings) {
  for (DType dtype : AllDTypes()) {
    if (dtype == DType::kString) continue;  // StringRoundTrip
    for (const ShapeCase& sc : kShapes) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " shape rank ", sc.shape.size()));
      const std::string all = SampleBytes(dtype);
      ASSERT_EQ(static_cast<int64_t>(all.size()), 6 * ElementWidth(dtype));
      const std::string bytes = all.substr(0, static_cast<size_t>(sc.n * ElementWidth(dtype)));

      v1::Tensor in = MakeTensor(ToProtoDataType(dtype), sc.shape);
      in.set_raw_data(bytes);
      in = OverTheWire(in);
      absl::StatusOr<DecodedTensor> dec = DecodeTensor(in, "inputs[0]");
      ASSERT_TRUE(dec.ok()) << dec.status();
      EXPECT_EQ(dec->encoding, Encoding::kRaw);
      EXPECT_EQ(dec->view.dtype, dtype);
      EXPECT_EQ(std::vector<int64_t>(dec->view.shape.begin(), dec->view.shape.end()), sc.shape);
      EXPECT_EQ(dec->view.data, static_cast<const void*>(in.raw_data().data())) << "zero copy";
      EXPECT_EQ(ViewBytes(dec->view), bytes);

      // Raw out.
      v1::Tensor raw_out;
      raw_out.add_float_data(1.0f);  // stale content must be replaced
      EncodeTensor(dec->view, Encoding::kRaw, &raw_out);
      EXPECT_EQ(raw_out.dtype(), ToProtoDataType(dtype));
      EXPECT_THAT(raw_out.shape(), ::testing::ElementsAreArray(sc.shape));
      EXPECT_THAT(DataFieldsSet(raw_out), ElementsAre("raw_data"));
      EXPECT_EQ(raw_out.raw_data(), bytes);

      // Typed out, over the wire, typed back in.
      v1::Tensor typed_out;
      EncodeTensor(dec->view, Encoding::kTyped, &typed_out);
      EXPECT_THAT(DataFieldsSet(typed_out), ElementsAre(TypedFieldName(dtype)));
      typed_out = OverTheWire(typed_out);
      absl::StatusOr<DecodedTensor> dec2 = DecodeTensor(typed_out, "inputs[0]");
      ASSERT_TRUE(dec2.ok()) << dec2.status();
      EXPECT_EQ(dec2->encoding, Encoding::kTyped);
      EXPECT_EQ(ViewBytes(dec2->view), bytes);

      // The decoded view survives a move of its owner.
      DecodedTensor moved = std::move(dec2).value();
      EXPECT_EQ(ViewBytes(moved.view), bytes);
    }
  }
}

TEST(TensorCodecTest, TypedEncodingWidensExactly) {
  // Spot checks of the values a JSON reader sees.
  struct Case {
    DType dtype;
    std::string raw;
    std::function<void(const v1::Tensor&)> check;
  };
  const std::vector<Case> cases = {
      {DType::kInt8, Pack<int8_t>({-128, 127}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.int32_data(), ElementsAre(-128, 127)); }},
      {DType::kInt16, Pack<int16_t>({-32768, 5}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.int32_data(), ElementsAre(-32768, 5)); }},
      {DType::kUInt8, Pack<uint8_t>({255, 0}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.uint32_data(), ElementsAre(255u, 0u)); }},
      {DType::kUInt16, Pack<uint16_t>({65535, 1}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.uint32_data(), ElementsAre(65535u, 1u)); }},
      {DType::kBool, Pack<uint8_t>({1, 0}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.bool_data(), ElementsAre(true, false)); }},
      {DType::kFloat16, Pack<uint16_t>({0x7BFF, 0x0001}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.float_data(), ElementsAre(65504.0f, 0x1p-24f)); }},
      {DType::kBFloat16, Pack<uint16_t>({0x3F80, 0xC000}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.float_data(), ElementsAre(1.0f, -2.0f)); }},
      {DType::kFloat8E4M3, Pack<uint8_t>({0x7E, 0x01}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.float_data(), ElementsAre(448.0f, 0x1p-9f)); }},
      {DType::kFloat8E5M2, Pack<uint8_t>({0x7B, 0xFC}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.float_data(), ElementsAre(57344.0f, -INFINITY)); }},
      {DType::kComplex64, Pack<float>({1.0f, 2.0f, 3.0f, 4.0f}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.float_data(), ElementsAre(1, 2, 3, 4)); }},
      {DType::kComplex128, Pack<double>({1.0, -2.0, 3.0, -4.0}),
       [](const v1::Tensor& t) { EXPECT_THAT(t.double_data(), ElementsAre(1, -2, 3, -4)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(DTypeName(c.dtype));
    v1::Tensor in = MakeTensor(ToProtoDataType(c.dtype), {2});
    in.set_raw_data(c.raw);
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(in, "x");
    ASSERT_TRUE(dec.ok()) << dec.status();
    v1::Tensor out;
    EncodeTensor(dec->view, Encoding::kTyped, &out);
    c.check(out);
  }
}

TEST(TensorCodecTest, TypedFloat32AndFloat64KeepBits) {
  v1::Tensor f = MakeTensor(v1::DATA_TYPE_FLOAT32, {4});
  for (uint32_t b : {0x7FC00001u, 0x7F800001u, 0x80000000u, 0xFFBFFFFFu}) f.add_float_data(F(b));
  f = OverTheWire(f);
  absl::StatusOr<DecodedTensor> dec = DecodeTensor(f, "x");
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(ViewBytes(dec->view),
            Pack<uint32_t>({0x7FC00001u, 0x7F800001u, 0x80000000u, 0xFFBFFFFFu}));

  v1::Tensor d = MakeTensor(v1::DATA_TYPE_FLOAT64, {3});
  for (uint64_t b : {0x7FF0000000000001ull, 0x8000000000000000ull, 0xFFF8000000000042ull}) {
    d.add_double_data(D(b));
  }
  dec = DecodeTensor(OverTheWire(d), "x");
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(ViewBytes(dec->view),
            Pack<uint64_t>({0x7FF0000000000001ull, 0x8000000000000000ull, 0xFFF8000000000042ull}));
}

// float_data for the narrow formats is rounded to nearest even on the way in.
TEST(TensorCodecTest, TypedNarrowFloatsRoundToNearestEven) {
  struct Case {
    v1::DataType dtype;
    std::vector<float> in;
    std::string want;
  };
  const float kInf = INFINITY;
  const std::vector<Case> cases = {
      {v1::DATA_TYPE_FLOAT16,
       {1.0f + 0x1p-11f, 65520.0f, 65504.0f, -0.0f, 0x1p-25f, 3 * 0x1p-25f},
       Pack<uint16_t>({0x3C00, 0x7C00, 0x7BFF, 0x8000, 0x0000, 0x0002})},
      {v1::DATA_TYPE_BFLOAT16,
       {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -kInf, -0.0f},
       Pack<uint16_t>({0x3F80, 0x3F82, 0xFF80, 0x8000})},
      {v1::DATA_TYPE_FLOAT8_E4M3,
       {448.0f, 464.0f, 500.0f, kInf, -kInf, -0.0f},
       Pack<uint8_t>({0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x80})},
      {v1::DATA_TYPE_FLOAT8_E5M2,
       {57344.0f, 61440.0f, -1e9f, 0x1p-17f, -0.0f},
       Pack<uint8_t>({0x7B, 0x7C, 0xFC, 0x00, 0x80})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(v1::DataType_Name(c.dtype));
    v1::Tensor t = MakeTensor(c.dtype, {static_cast<int64_t>(c.in.size())});
    for (float f : c.in) t.add_float_data(f);
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(t, "x");
    ASSERT_TRUE(dec.ok()) << dec.status();
    EXPECT_EQ(dec->encoding, Encoding::kTyped);
    EXPECT_EQ(ViewBytes(dec->view), c.want);
  }
}

TEST(TensorCodecTest, TypedIntegersAtTheirBounds) {
  v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT8, {2});
  t.add_int32_data(-128);
  t.add_int32_data(127);
  absl::StatusOr<DecodedTensor> dec = DecodeTensor(t, "x");
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(ViewBytes(dec->view), Pack<int8_t>({-128, 127}));

  t = MakeTensor(v1::DATA_TYPE_UINT16, {2});
  t.add_uint32_data(0);
  t.add_uint32_data(65535);
  dec = DecodeTensor(t, "x");
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(ViewBytes(dec->view), Pack<uint16_t>({0, 65535}));

  t = MakeTensor(v1::DATA_TYPE_BOOL, {3});
  t.add_bool_data(true);
  t.add_bool_data(false);
  t.add_bool_data(true);
  dec = DecodeTensor(t, "x");
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(ViewBytes(dec->view), Pack<uint8_t>({1, 0, 1}));
}

TEST(TensorCodecTest, StringRoundTrip) {
  const std::vector<std::string> values = {
      "", "abc", std::string("\0\xff\n", 3), std::string(1000, 'x'), "tail", "z"};
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(absl::StrCat("rank ", sc.shape.size()));
    v1::Tensor in = MakeTensor(v1::DATA_TYPE_STRING, sc.shape);
    for (int64_t i = 0; i < sc.n; ++i) in.add_string_data(values[i]);
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(in, "inputs[0]");
    ASSERT_TRUE(dec.ok()) << dec.status();
    EXPECT_EQ(dec->encoding, Encoding::kTyped);
    ASSERT_EQ(dec->view.num_bytes(), sc.n * 16);
    const StringRef* refs = dec->view.data_as<StringRef>();
    for (int64_t i = 0; i < sc.n; ++i) {
      EXPECT_EQ(refs[i].data, in.string_data(static_cast<int>(i)).data()) << "points into proto";
      EXPECT_EQ(std::string(refs[i].data, refs[i].size), values[i]);
    }
    for (Encoding enc : {Encoding::kRaw, Encoding::kTyped}) {
      v1::Tensor out;
      EncodeTensor(dec->view, enc, &out);
      EXPECT_EQ(out.dtype(), v1::DATA_TYPE_STRING);
      EXPECT_THAT(out.shape(), ::testing::ElementsAreArray(sc.shape));
      EXPECT_THAT(DataFieldsSet(out), ElementsAre("string_data"));
      ASSERT_EQ(out.string_data_size(), sc.n);
      for (int64_t i = 0; i < sc.n; ++i) EXPECT_EQ(out.string_data(static_cast<int>(i)), values[i]);
    }
  }
}

TEST(TensorCodecTest, ZeroSizeTensors) {
  const std::vector<std::vector<int64_t>> shapes = {{0}, {2, 0, 3}, {0, 0}};
  for (DType dtype : AllDTypes()) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " rank ", shape.size()));
      // No data field at all.
      v1::Tensor in = MakeTensor(ToProtoDataType(dtype), shape);
      absl::StatusOr<DecodedTensor> dec = DecodeTensor(in, "x");
      ASSERT_TRUE(dec.ok()) << dec.status();
      EXPECT_EQ(dec->encoding, Encoding::kRaw);
      EXPECT_EQ(dec->view.num_elements(), 0);
      EXPECT_NE(dec->view.data, nullptr);
      EXPECT_EQ(std::vector<int64_t>(dec->view.shape.begin(), dec->view.shape.end()), shape);
      for (Encoding enc : {Encoding::kRaw, Encoding::kTyped}) {
        v1::Tensor out;
        EncodeTensor(dec->view, enc, &out);
        EXPECT_THAT(out.shape(), ::testing::ElementsAreArray(shape));
        EXPECT_THAT(DataFieldsSet(out), ElementsAre());
        absl::StatusOr<DecodedTensor> again = DecodeTensor(OverTheWire(out), "x");
        ASSERT_TRUE(again.ok()) << again.status();
        EXPECT_EQ(again->view.num_elements(), 0);
      }
    }
  }
}

TEST(TensorCodecTest, AllocateRawOutput) {
  for (DType dtype : AllDTypes()) {
    if (dtype == DType::kString) continue;
    SCOPED_TRACE(DTypeName(dtype));
    v1::Tensor out;
    out.add_int32_data(7);  // stale content is dropped
    const Shape shape = {2, 3};
    char* p = static_cast<char*>(AllocateRawOutput(dtype, shape, &out));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, out.raw_data().data());
    ASSERT_EQ(static_cast<int64_t>(out.raw_data().size()), 6 * ElementWidth(dtype));
    EXPECT_EQ(out.dtype(), ToProtoDataType(dtype));
    EXPECT_THAT(out.shape(), ElementsAre(2, 3));
    EXPECT_THAT(DataFieldsSet(out), ElementsAre("raw_data"));
    const std::string sample = SampleBytes(dtype);
    std::memcpy(p, sample.data(), sample.size());
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(out, "x");
    ASSERT_TRUE(dec.ok()) << dec.status();
    EXPECT_EQ(ViewBytes(dec->view), sample);

    v1::Tensor empty;
    EXPECT_NE(AllocateRawOutput(dtype, Shape{0, 4}, &empty), nullptr);
    EXPECT_TRUE(empty.raw_data().empty());
    EXPECT_THAT(empty.shape(), ElementsAre(0, 4));
  }
}

// ---------------------------------------------------------------- rejections

struct RejectCase {
  const char* name;
  std::function<v1::Tensor()> make;
  std::vector<std::string> substrings;  // all must appear in the message
};

v1::Tensor WithFloats(v1::DataType dtype, std::vector<int64_t> shape, int count) {
  v1::Tensor t = MakeTensor(dtype, std::move(shape));
  for (int i = 0; i < count; ++i) t.add_float_data(1.0f);
  return t;
}

TEST(TensorCodecTest, Rejections) {
  const std::vector<RejectCase> cases = {
      {"unspecified dtype",
       [] { return WithFloats(v1::DATA_TYPE_UNSPECIFIED, {1}, 1); },
       {"inputs[0].dtype: ", "is not a valid data type"}},
      {"unknown dtype",
       [] { return WithFloats(static_cast<v1::DataType>(99), {1}, 1); },
       {"inputs[0].dtype: 99 is not a valid data type"}},
      {"negative dim",
       [] {
         return WithFloats(v1::DATA_TYPE_FLOAT32, {2, -2}, 0);
       },
       {"inputs[0].shape[1] = -2 is negative"}},
      {"negative dim behind a zero",
       [] {
         return WithFloats(v1::DATA_TYPE_FLOAT32, {0, -1}, 0);
       },
       {"inputs[0].shape[1] = -1"}},
      {"element count overflow",
       [] {
         return WithFloats(v1::DATA_TYPE_INT8, {1ll << 32, 1ll << 32}, 1);
       },
       {"inputs[0].shape", "int64"}},
      {"byte size overflow",
       [] { return WithFloats(v1::DATA_TYPE_COMPLEX128, {1ll << 60}, 1); },
       {"inputs[0].shape", "byte size"}},
      {"raw and typed",
       [] {
         v1::Tensor t = WithFloats(v1::DATA_TYPE_FLOAT32, {1}, 1);
         t.set_raw_data(std::string(4, '\0'));
         return t;
       },
       {"inputs[0]", "raw_data", "float_data"}},
      {"two typed fields",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT32, {1});
         t.add_int32_data(1);
         t.add_int64_data(1);
         return t;
       },
       {"int32_data", "int64_data"}},
      {"no data",
       [] {
         return MakeTensor(v1::DATA_TYPE_FLOAT16, {2, 3});
       },
       {"inputs[0] has no data: set raw_data or float_data"}},
      {"no data scalar",
       [] { return MakeTensor(v1::DATA_TYPE_INT8, {}); },
       {"inputs[0] has no data: set raw_data or int32_data"}},
      {"no data string",
       [] { return MakeTensor(v1::DATA_TYPE_STRING, {1}); },
       {"inputs[0] has no data: set string_data"}},
      {"int32_data for FLOAT32",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_FLOAT32, {1});
         t.add_int32_data(1);
         return t;
       },
       {"inputs[0].int32_data cannot carry FLOAT32 values; use float_data or raw_data"}},
      {"float_data for COMPLEX128",
       [] { return WithFloats(v1::DATA_TYPE_COMPLEX128, {1}, 2); },
       {"inputs[0].float_data cannot carry COMPLEX128 values; use double_data or raw_data"}},
      {"double_data for COMPLEX64",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_COMPLEX64, {1});
         t.add_double_data(1);
         t.add_double_data(2);
         return t;
       },
       {"inputs[0].double_data cannot carry COMPLEX64 values; use float_data or raw_data"}},
      {"int64_data for INT32",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT32, {1});
         t.add_int64_data(1);
         return t;
       },
       {"inputs[0].int64_data cannot carry INT32 values; use int32_data or raw_data"}},
      {"int32_data for UINT8",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_UINT8, {1});
         t.add_int32_data(1);
         return t;
       },
       {"inputs[0].int32_data cannot carry UINT8 values; use uint32_data or raw_data"}},
      {"bool_data for UINT8",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_UINT8, {1});
         t.add_bool_data(true);
         return t;
       },
       {"inputs[0].bool_data cannot carry UINT8 values; use uint32_data or raw_data"}},
      {"int32_data for BOOL",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_BOOL, {1});
         t.add_int32_data(1);
         return t;
       },
       {"inputs[0].int32_data cannot carry BOOL values; use bool_data or raw_data"}},
      {"string_data for INT64",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT64, {1});
         t.add_string_data("1");
         return t;
       },
       {"inputs[0].string_data cannot carry INT64 values; use int64_data or raw_data"}},
      {"float_data for STRING",
       [] { return WithFloats(v1::DATA_TYPE_STRING, {1}, 1); },
       {"inputs[0].float_data cannot carry STRING values; use string_data"}},
      {"raw_data for STRING",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_STRING, {1});
         t.set_raw_data("abc");
         return t;
       },
       {"inputs[0].raw_data cannot carry STRING values; use string_data"}},
      {"too few floats",
       [] {
         return WithFloats(v1::DATA_TYPE_FLOAT32, {2, 3}, 5);
       },
       {"inputs[0].float_data has 5 values but shape [2,3] needs 6"}},
      {"too many floats",
       [] { return WithFloats(v1::DATA_TYPE_BFLOAT16, {}, 2); },
       {"inputs[0].float_data has 2 values but shape [] needs 1"}},
      {"complex count",
       [] {
         return WithFloats(v1::DATA_TYPE_COMPLEX64, {2, 3}, 6);
       },
       {"inputs[0].float_data has 6 values but shape [2,3] of COMPLEX64 needs 12",
        "2 per element"}},
      {"typed data for an empty shape",
       [] { return WithFloats(v1::DATA_TYPE_FLOAT32, {0}, 1); },
       {"inputs[0].float_data has 1 values but shape [0] needs 0"}},
      {"string count",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_STRING, {3});
         t.add_string_data("a");
         return t;
       },
       {"inputs[0].string_data has 1 values but shape [3] needs 3"}},
      {"raw size",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_FLOAT32, {2, 3});
         t.set_raw_data(std::string(10, '\0'));
         return t;
       },
       {"inputs[0].raw_data has 10 bytes but shape [2,3] of FLOAT32 needs 24"}},
      {"raw data for an empty shape",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT16, {0, 5});
         t.set_raw_data(std::string(2, '\0'));
         return t;
       },
       {"inputs[0].raw_data has 2 bytes but shape [0,5] of INT16 needs 0"}},
      {"INT8 too large",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT8, {4});
         for (int v : {1, 2, 3, 300}) t.add_int32_data(v);
         return t;
       },
       {"inputs[0].int32_data[3] = 300 is out of range [-128, 127] for INT8"}},
      {"INT8 too small, first bad index",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT8, {3});
         for (int v : {0, -129, 1000}) t.add_int32_data(v);
         return t;
       },
       {"inputs[0].int32_data[1] = -129 is out of range [-128, 127] for INT8"}},
      {"INT16",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT16, {1});
         t.add_int32_data(32768);
         return t;
       },
       {"inputs[0].int32_data[0] = 32768 is out of range [-32768, 32767] for INT16"}},
      {"UINT8",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_UINT8, {2});
         t.add_uint32_data(255);
         t.add_uint32_data(256);
         return t;
       },
       {"inputs[0].uint32_data[1] = 256 is out of range [0, 255] for UINT8"}},
      {"UINT16",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_UINT16, {1});
         t.add_uint32_data(4000000000u);
         return t;
       },
       {"inputs[0].uint32_data[0] = 4000000000 is out of range [0, 65535] for UINT16"}},
      {"BOOL raw byte",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_BOOL, {2, 3});
         t.set_raw_data(Pack<uint8_t>({0, 1, 1, 0, 1, 2}));
         return t;
       },
       {"inputs[0].raw_data[5] = 2 is not a valid BOOL (0 or 1)"}},
      {"BOOL raw byte 255",
       [] {
         v1::Tensor t = MakeTensor(v1::DATA_TYPE_BOOL, {2});
         t.set_raw_data(Pack<uint8_t>({255, 0}));
         return t;
       },
       {"inputs[0].raw_data[0] = 255 is not a valid BOOL (0 or 1)"}},
  };
  for (const RejectCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(c.make(), "inputs[0]");
    ASSERT_FALSE(dec.ok());
    EXPECT_EQ(dec.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& s : c.substrings) EXPECT_THAT(dec.status().message(), HasSubstr(s));
    EXPECT_LT(dec.status().message().size(), 1024u);
  }
}

// Messages quote at most one value: a huge tensor never ends up in a status.
TEST(TensorCodecTest, MessagesStayShortForHugeInputs) {
  std::vector<v1::Tensor> protos;
  {
    v1::Tensor t = MakeTensor(v1::DATA_TYPE_FLOAT32, {});
    for (int i = 0; i < 1000; ++i) t.add_shape(1);
    t.add_shape(-1);
    protos.push_back(t);
  }
  {
    v1::Tensor t = MakeTensor(v1::DATA_TYPE_FLOAT32, {});
    for (int i = 0; i < 1000; ++i) t.add_shape(1);
    t.set_raw_data(std::string(100000, '\x01'));
    protos.push_back(t);
  }
  {
    v1::Tensor t = MakeTensor(v1::DATA_TYPE_INT8, {100000});
    for (int i = 0; i < 99999; ++i) t.add_int32_data(1);
    t.add_int32_data(1000);
    protos.push_back(t);
  }
  {
    v1::Tensor t = MakeTensor(v1::DATA_TYPE_STRING, {2});
    t.add_string_data(std::string(1 << 20, 'a'));
    protos.push_back(t);
  }
  for (size_t i = 0; i < protos.size(); ++i) {
    SCOPED_TRACE(i);
    absl::StatusOr<DecodedTensor> dec = DecodeTensor(protos[i], "inputs[0]");
    ASSERT_FALSE(dec.ok());
    EXPECT_EQ(dec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_LT(dec.status().message().size(), 1024u) << dec.status().message().substr(0, 200);
    EXPECT_THAT(dec.status().message(), HasSubstr("inputs[0]"));
  }
}

}  // namespace
}  // namespace tensorops
