// Reverse-1: every sentence of specs/openvino-Reverse-1.rst and every rule of
// semantics.md "Reverse-1" as a case.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/op_registry.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_util.h"
#include "tests/seed.h"

namespace tensorops {
namespace test {
namespace {

const Attrs kIndex = {{"mode", Str("index")}};
const Attrs kMask = {{"mode", Str("mask")}};

TestTensor Mask(const std::vector<int64_t>& bits) { return Vec(DType::kBool, bits); }

// [[1,2,3],[4,5,6]]
TestTensor Small() { return FromInt64(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6}); }

// "Reverse produces a tensor with the same shape as the first input tensor and
// with elements reversed along dimensions specified in the second input tensor."
TEST(ReverseSpec, ReversesListedAxesExactValues) {
  const TestTensor data = Small();
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {3, 2, 1, 6, 5, 4}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {1})}, kIndex)));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {4, 5, 6, 1, 2, 3}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, kIndex)));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {6, 5, 4, 3, 2, 1}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {0, 1})}, kIndex)));
}

TEST(ReverseSpec, ThreeDimensionalExactValues) {
  // [2,2,3]: 1..12; reverse axes 0 and 2.
  const TestTensor data =
      FromInt64(DType::kInt64, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_TRUE(Matches(FromInt64(DType::kInt64, {2, 2, 3}, {9, 8, 7, 12, 11, 10, 3, 2, 1, 6, 5, 4}),
                      RunOp("Reverse", {data, Vec(DType::kInt32, {0, 2})}, kIndex)));
}

// "The axes can be represented either by dimension indices or as a mask."
// "true means the corresponding axes should be reverted, false means untouched."
TEST(ReverseSpec, MaskModeEqualsIndexMode) {
  const TestTensor data = Small();
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {3, 2, 1, 6, 5, 4}),
                      RunOp("Reverse", {data, Mask({0, 1})}, kMask)));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {4, 5, 6, 1, 2, 3}),
                      RunOp("Reverse", {data, Mask({1, 0})}, kMask)));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {6, 5, 4, 3, 2, 1}),
                      RunOp("Reverse", {data, Mask({1, 1})}, kMask)));
  std::mt19937_64 rng(::tensorops::testing::TestSeed(7));
  const TestTensor big = RandomTensor(DType::kFloat32, {3, 4, 5, 2}, &rng);
  for (int m = 0; m < 16; ++m) {
    std::vector<int64_t> bits, axes;
    for (int d = 0; d < 4; ++d) {
      bits.push_back((m >> d) & 1);
      if ((m >> d) & 1) axes.push_back(d);
    }
    SCOPED_TRACE(absl::StrCat("mask ", VecToString(bits)));
    const absl::StatusOr<Tensor> by_mask = RunOp("Reverse", {big, Mask(bits)}, kMask);
    EXPECT_TRUE(Matches(ReferenceReverse(big, axes), by_mask));
    EXPECT_TRUE(Matches(ReferenceReverse(big, axes),
                        RunOp("Reverse", {big, Vec(DType::kInt64, axes)}, kIndex)));
  }
}

// "The length of the second tensor should be in a range from 0 to rank."
TEST(ReverseSpec, IndexLengthZeroToRank) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  const TestTensor data = RandomTensor(DType::kInt16, {2, 3, 4}, &rng);
  EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Vec(DType::kInt64, {})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {2}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {2})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0, 2}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {2, 0})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0, 1, 2}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {1, 2, 0})}, kIndex)));
}

// "If no axis specified ... Reverse just passes the source tensor through."
TEST(ReverseSpec, NoAxisPassesThrough) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(2));
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = RandomTensor(dt, {3, 1, 4}, &rng);
    EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Vec(DType::kInt32, {})}, kIndex)));
    EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Mask({0, 0, 0})}, kMask)));
  }
}

// semantics: "Empty axes or an all-false mask pass the data through unchanged (rank 0 included)."
TEST(ReverseSemantics, RankZeroPassesThrough) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    std::mt19937_64 rng(::tensorops::testing::TestSeed(3));
    const TestTensor data = RandomTensor(dt, {}, &rng);
    EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Vec(DType::kInt64, {})}, kIndex)));
    EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Mask({})}, kMask)));
  }
}

TEST(ReverseSemantics, RankZeroWithAnAxisRejected) {
  const TestTensor data = FromInt64(DType::kFloat32, {}, {5});
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, kIndex), "Reverse", "axis", "0");
  // Every axis is out of range for rank 0, negative ones too.
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {-1})}, kIndex), "Reverse", "axis",
                 "-1");
  // Mask for rank 0 must have length 0.
  EXPECT_INVALID(RunOp("Reverse", {data, Mask({1})}, kMask), "Reverse", "axis");
}

// "mode ... Range of values: index, mask; Type: string; Required: yes"
TEST(ReverseSpec, ModeIsRequired) {
  const TestTensor data = Small();
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, {}), "Reverse", "mode");
}

TEST(ReverseSemantics, ModeOtherValuesRejected) {
  const TestTensor data = Small();
  for (const std::string mode : {"INDEX", "Mask", "", "indices", "index ", "both"}) {
    SCOPED_TRACE(mode);
    EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, {{"mode", Str(mode)}}),
                   "Reverse", "mode");
  }
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, {{"mode", Str("sideways")}}),
                 "Reverse", "mode", "sideways");
}

TEST(ReverseSemantics, ModeOfWrongKindRejected) {
  const TestTensor data = Small();
  for (AttrValue v :
       {AttrValue::Number(0), AttrValue::Number(1.5), AttrValue::Bool(true),
        AttrValue::OfKind(AttrValue::Kind::kList), AttrValue::OfKind(AttrValue::Kind::kStruct),
        AttrValue::OfKind(AttrValue::Kind::kNull)}) {
    SCOPED_TRACE(std::string(AttrKindName(v.kind)));
    EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, {{"mode", v}}), "Reverse",
                   "mode");
  }
}

TEST(ReverseSemantics, LongModeValueGivesShortMessage) {
  const TestTensor data = Small();
  // ExpectStatus checks the message stays under 1 KiB.
  EXPECT_INVALID(
      RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, {{"mode", Str(std::string(1 << 20, 'x'))}}),
      "Reverse", "mode");
}

// "T2: any supported integer type."
TEST(ReverseSemantics, IndexModeAcceptsEveryIntegerType) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(4));
  const TestTensor data = RandomTensor(DType::kFloat64, {2, 3, 4}, &rng);
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_TRUE(
        Matches(ReferenceReverse(data, {0, 2}), RunOp("Reverse", {data, Vec(t, {2, 0})}, kIndex)));
    EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Vec(t, {})}, kIndex)));
  }
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_TRUE(Matches(ReferenceReverse(data, {1, 2}),
                        RunOp("Reverse", {data, Vec(t, {-1, -2})}, kIndex)));
  }
}

// semantics: "BOOL and floats are rejected" in index mode.
TEST(ReverseSemantics, IndexModeRejectsNonIntegerAxisTypes) {
  const TestTensor data = Small();
  for (DType t : AllDTypes()) {
    if (IsIntegerDType(t)) continue;
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("Reverse", {data, Vec(t, {0})}, kIndex), "Reverse", "axis",
                   std::string(DTypeName(t)));
  }
}

// "2: axis 1D tensor"; semantics: "a scalar is rejected (the spec says 1-D)".
TEST(ReverseSemantics, IndexAxisMustBeOneDimensional) {
  const TestTensor data = Small();
  EXPECT_INVALID(RunOp("Reverse", {data, ScalarOf(DType::kInt64, 0)}, kIndex), "Reverse", "axis");
  EXPECT_INVALID(RunOp("Reverse", {data, FromInt64(DType::kInt64, {1, 1}, {0})}, kIndex), "Reverse",
                 "axis");
  EXPECT_INVALID(RunOp("Reverse", {data, FromInt64(DType::kInt64, {2, 1}, {0, 1})}, kIndex),
                 "Reverse", "axis");
}

// semantics: "Negative axes count from the end; valid range [-rank, rank-1]."
TEST(ReverseSemantics, NegativeAxes) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(5));
  const TestTensor data = RandomTensor(DType::kUInt8, {2, 3, 4}, &rng);
  for (int64_t a = -3; a <= 2; ++a) {
    SCOPED_TRACE(a);
    EXPECT_TRUE(Matches(ReferenceReverse(data, {a < 0 ? a + 3 : a}),
                        RunOp("Reverse", {data, Vec(DType::kInt64, {a})}, kIndex)));
  }
}

TEST(ReverseSemantics, AxisOutOfRangeRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {2, 3, 4}, std::vector<int64_t>(24, 1));
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {3})}, kIndex), "Reverse", "axis", "3",
                 "[-3, 2]");
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {-4})}, kIndex), "Reverse", "axis",
                 "-4");
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt32, {0, 17})}, kIndex), "Reverse", "axis",
                 "17");
  EXPECT_INVALID(
      RunOp("Reverse", {data, Vec(DType::kInt64, {std::numeric_limits<int64_t>::min()})}, kIndex),
      "Reverse", "axis");
  // Unsigned values are not reinterpreted as negative.
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kUInt8, {255})}, kIndex), "Reverse", "axis",
                 "255");
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kUInt16, {65535})}, kIndex), "Reverse", "axis",
                 "65535");
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kUInt32, {4294967295})}, kIndex), "Reverse",
                 "axis", "4294967295");
  EXPECT_INVALID(
      RunOp("Reverse", {data, FromUInt64(DType::kUInt64, {1}, {18446744073709551615ull})}, kIndex),
      "Reverse", "axis", "18446744073709551615");
}

// "The length of the second tensor should be in a range from 0 to rank of the
// 1st input tensor." A should, not a must: OpenVINO's type_prop test
// more_axes_index_than_input_rank builds Reverse on rank 4 with
// axis = [0, -1, 1, 2, 3, 3, 2] and expects a valid op (semantics.md).
TEST(ReverseSpec, IndexLengthAboveRankAccepted) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(12));
  const TestTensor data4 = RandomTensor(DType::kFloat32, {2, 3, 4, 5}, &rng);
  EXPECT_TRUE(
      Matches(ReferenceReverse(data4, {0, 1, 2, 3}),
              RunOp("Reverse", {data4, Vec(DType::kInt64, {0, -1, 1, 2, 3, 3, 2})}, kIndex)));
  const TestTensor data = Small();  // rank 2
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0, 1}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {0, 1, 0})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {1}),
                      RunOp("Reverse", {data, Vec(DType::kUInt8, {1, 1, 1, 1})}, kIndex)));
  const TestTensor line = FromInt64(DType::kInt32, {3}, {1, 2, 3});
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {3}, {3, 2, 1}),
                      RunOp("Reverse", {line, Vec(DType::kInt64, {0, -1})}, kIndex)));
  // Many entries, every one of them still checked: the bad one is named by index.
  std::vector<int64_t> many(100, 1);
  many[73] = 2;
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, many)}, kIndex), "Reverse", "axis[73]",
                 "2");
}

// semantics: "Duplicates (also after normalising negatives) are merged: each
// axis is reversed once, as OpenVINO does."
TEST(ReverseSemantics, DuplicateAxesMerged) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(6));
  const TestTensor data = RandomTensor(DType::kInt32, {2, 3, 4}, &rng);
  EXPECT_TRUE(Matches(ReferenceReverse(data, {1}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {1, 1})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {1}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {1, -2})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0}),
                      RunOp("Reverse", {data, Vec(DType::kInt8, {0, 0, -3})}, kIndex)));
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0, 2}),
                      RunOp("Reverse", {data, Vec(DType::kInt16, {2, 0, -1})}, kIndex)));
  // Exact values: reversing twice would be the identity; merged it is one reversal.
  const TestTensor small = Small();
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {3, 2, 1, 6, 5, 4}),
                      RunOp("Reverse", {small, Vec(DType::kInt64, {1, -1})}, kIndex)));
}

// "otherwise 1D tensor of type T3 and with a length equal to the rank of data"
TEST(ReverseSemantics, MaskLengthMustEqualRank) {
  const TestTensor data = FromInt64(DType::kInt32, {2, 3, 4}, std::vector<int64_t>(24, 1));
  EXPECT_INVALID(RunOp("Reverse", {data, Mask({1, 0})}, kMask), "Reverse", "axis", "2");
  EXPECT_INVALID(RunOp("Reverse", {data, Mask({1, 0, 0, 1})}, kMask), "Reverse", "axis", "4");
  EXPECT_INVALID(RunOp("Reverse", {data, Mask({})}, kMask), "Reverse", "axis", "0");
  EXPECT_INVALID(RunOp("Reverse", {data, FromInt64(DType::kBool, {}, {1})}, kMask), "Reverse",
                 "axis");
  EXPECT_INVALID(RunOp("Reverse", {data, FromInt64(DType::kBool, {1, 3}, {1, 0, 1})}, kMask),
                 "Reverse", "axis");
}

// "T3: boolean type."
TEST(ReverseSemantics, MaskMustBeBool) {
  const TestTensor data = Small();
  for (DType t : AllDTypes()) {
    if (t == DType::kBool) continue;
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("Reverse", {data, Vec(t, {0, 1})}, kMask), "Reverse", "axis",
                   std::string(DTypeName(t)));
  }
}

// "Outputs: output reversed tensor with shape and type equal to data tensor."
// semantics: every op takes all 18 element types; numbers move as bits.
TEST(ReverseSemantics, AllElementTypes) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    std::mt19937_64 rng(::tensorops::testing::TestSeed(static_cast<uint64_t>(dt)));
    const TestTensor data = RandomTensor(dt, {3, 4, 5}, &rng);
    for (const std::vector<int64_t>& axes :
         std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {-1, -2, -3}}) {
      SCOPED_TRACE(VecToString(axes));
      const absl::StatusOr<Tensor> got = RunOp("Reverse", {data, Vec(DType::kInt64, axes)}, kIndex);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->dtype(), dt);
      EXPECT_TRUE(Matches(ReferenceReverse(data, axes), got));
      std::vector<int64_t> bits(3, 0);
      for (int64_t a : axes) bits[a < 0 ? a + 3 : a] = 1;
      EXPECT_TRUE(
          Matches(ReferenceReverse(data, axes), RunOp("Reverse", {data, Mask(bits)}, kMask)));
    }
    // Exact values round-trip through each type's encoding.
    const TestTensor exact = FromInt64(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(Matches(FromInt64(dt, {2, 3}, {6, 5, 4, 3, 2, 1}),
                        RunOp("Reverse", {exact, Vec(DType::kInt64, {0, 1})}, kIndex)));
  }
}

TEST(ReverseSemantics, StringElements) {
  const TestTensor data = FromStrings(
      {2, 3}, {"", std::string("a\0b", 3), "ccc", std::string(300, 'd'), "\xff\xfe", "x"});
  EXPECT_TRUE(Matches(FromStrings({2, 3}, {"ccc", std::string("a\0b", 3), "", "x", "\xff\xfe",
                                           std::string(300, 'd')}),
                      RunOp("Reverse", {data, Vec(DType::kInt64, {1})}, kIndex)));
}

// semantics: "NaN payloads and -0.0 survive unchanged."
TEST(ReverseSemantics, NaNPayloadsAndNegativeZeroKept) {
  const TestTensor f32 =
      FromBits(DType::kFloat32, {6},
               {0x7FC00001, 0xFF800001, 0x80000000, 0x7FBFFFFF, 0x00000001, 0xFFFFFFFF});
  EXPECT_TRUE(
      Matches(FromBits(DType::kFloat32, {6},
                       {0xFFFFFFFF, 0x00000001, 0x7FBFFFFF, 0x80000000, 0xFF800001, 0x7FC00001}),
              RunOp("Reverse", {f32, Vec(DType::kInt64, {0})}, kIndex)));
  const TestTensor f64 = FromBits(
      DType::kFloat64, {3}, {0x7FF0000000000001ull, 0x8000000000000000ull, 0xFFF8DEADBEEF0001ull});
  EXPECT_TRUE(
      Matches(FromBits(DType::kFloat64, {3},
                       {0xFFF8DEADBEEF0001ull, 0x8000000000000000ull, 0x7FF0000000000001ull}),
              RunOp("Reverse", {f64, Vec(DType::kInt64, {0})}, kIndex)));
  const TestTensor f16 = FromBits(DType::kFloat16, {3}, {0x7C01, 0x8000, 0xFE00});
  EXPECT_TRUE(Matches(FromBits(DType::kFloat16, {3}, {0xFE00, 0x8000, 0x7C01}),
                      RunOp("Reverse", {f16, Vec(DType::kInt64, {0})}, kIndex)));
  const TestTensor bf16 = FromBits(DType::kBFloat16, {3}, {0x7F81, 0x8000, 0xFFC1});
  EXPECT_TRUE(Matches(FromBits(DType::kBFloat16, {3}, {0xFFC1, 0x8000, 0x7F81}),
                      RunOp("Reverse", {bf16, Vec(DType::kInt64, {0})}, kIndex)));
  for (DType f8 : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    SCOPED_TRACE(DTypeName(f8));
    const TestTensor d = FromBits(f8, {4}, {0x7F, 0xFF, 0x80, 0x7D});
    EXPECT_TRUE(Matches(FromBits(f8, {4}, {0x7D, 0x80, 0xFF, 0x7F}),
                        RunOp("Reverse", {d, Vec(DType::kInt64, {0})}, kIndex)));
  }
  const TestTensor c64 =
      FromBits(DType::kComplex64, {2}, {0x800000007FC00001ull, 0x7F80000180000000ull});
  EXPECT_TRUE(
      Matches(FromBits(DType::kComplex64, {2}, {0x7F80000180000000ull, 0x800000007FC00001ull}),
              RunOp("Reverse", {c64, Vec(DType::kInt64, {0})}, kIndex)));
}

// semantics: zero-size dimensions give an empty output of the same shape.
TEST(ReverseSemantics, ZeroSizeDims) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    for (const Shape& shape : {Shape{0}, Shape{0, 3}, Shape{2, 0, 3}, Shape{4, 0}}) {
      const TestTensor data = Zeros(dt, shape);
      for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) {
        const absl::StatusOr<Tensor> got =
            RunOp("Reverse", {data, Vec(DType::kInt64, {a})}, kIndex);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->shape(), shape);
        EXPECT_EQ(got->num_elements(), 0);
        EXPECT_EQ(got->dtype(), dt);
      }
      std::vector<int64_t> all(shape.size(), 1);
      EXPECT_TRUE(Matches(data, RunOp("Reverse", {data, Mask(all)}, kMask)));
    }
  }
}

TEST(ReverseSemantics, SizeOneDims) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(8));
  const TestTensor data = RandomTensor(DType::kComplex128, {1, 5, 1, 3, 1}, &rng);
  for (int64_t a = 0; a < 5; ++a) {
    SCOPED_TRACE(a);
    EXPECT_TRUE(Matches(ReferenceReverse(data, {a}),
                        RunOp("Reverse", {data, Vec(DType::kInt64, {a})}, kIndex)));
  }
  EXPECT_TRUE(Matches(ReferenceReverse(data, {0, 1, 2, 3, 4}),
                      RunOp("Reverse", {data, Mask({1, 1, 1, 1, 1})}, kMask)));
}

// The XML example: data [3,10,100,200], one axis.
TEST(ReverseSpec, XmlExampleShape) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(9));
  for (DType dt : {DType::kFloat32, DType::kUInt8}) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = RandomTensor(dt, {3, 10, 100, 200}, &rng);
    for (int64_t a : {0, 1, 2, 3, -1}) {
      SCOPED_TRACE(a);
      const TestTensor axis = Vec(DType::kInt64, {a});
      const TensorView views[] = {data.view(), axis.view()};
      const absl::StatusOr<Tensor> got = ExecuteOp(Builtins(), "Reverse", views, kIndex);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->shape(), (Shape{3, 10, 100, 200}));
      EXPECT_TRUE(Matches(ReferenceReverse(data, {a}), got));
    }
  }
}

TEST(ReverseSemantics, AliasReverse1) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(10));
  const TestTensor data = RandomTensor(DType::kInt8, {3, 4}, &rng);
  EXPECT_TRUE(Matches(ReferenceReverse(data, {1}),
                      RunOp("Reverse-1", {data, Vec(DType::kInt64, {1})}, kIndex)));
  EXPECT_TRUE(
      Matches(ReferenceReverse(data, {0}), RunOp("Reverse-1", {data, Mask({1, 0})}, kMask)));
  EXPECT_INVALID(RunOp("Reverse-1", {data, Vec(DType::kInt64, {5})}, kIndex), "Reverse", "axis",
                 "5");
}

TEST(ReverseSemantics, UnknownAttributeRejected) {
  const TestTensor data = Small();
  Attrs attrs = kIndex;
  attrs["axis"] = Int(0);
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, attrs), "Reverse", "axis");
  attrs = kIndex;
  attrs["batch_axis"] = Int(0);
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, attrs), "Reverse", "batch_axis");
  attrs = kIndex;
  attrs[std::string(100000, 'z')] = Int(0);
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0})}, attrs), "Reverse", "zzz");
}

TEST(ReverseSemantics, WrongNumberOfInputsRejected) {
  const TestTensor data = Small();
  EXPECT_INVALID(RunOp("Reverse", {}, kIndex), "Reverse");
  EXPECT_INVALID(RunOp("Reverse", {data}, kIndex), "Reverse");
  EXPECT_INVALID(RunOp("Reverse", {data, Vec(DType::kInt64, {0}), Vec(DType::kInt64, {0})}, kIndex),
                 "Reverse");
}

TEST(ReverseSemantics, PrepareReportsOutputTypeAndShape) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(11));
  const TestTensor data = RandomTensor(DType::kBFloat16, {2, 5, 3}, &rng);
  const absl::StatusOr<PreparedOp> p =
      PrepareOnly("Reverse", {data, Vec(DType::kInt64, {1})}, kIndex);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->dtype, DType::kBFloat16);
  EXPECT_EQ(p->shape, (Shape{2, 5, 3}));
}

}  // namespace
}  // namespace test
}  // namespace tensorops
