// ReverseSequence-1: every sentence of specs/openvino-ReverseSequence-1.txt and
// every rule of semantics.md "ReverseSequence-1" as a case.
#include <cmath>
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

Attrs Axes(int64_t batch_axis, int64_t seq_axis) {
  return {{"batch_axis", Int(batch_axis)}, {"seq_axis", Int(seq_axis)}};
}

// [[1..4],[5..8],[9..12]]
TestTensor Rows() {
  return FromInt64(DType::kInt32, {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

const std::vector<DType> kFloatTypes = {DType::kFloat32,  DType::kFloat64,    DType::kFloat16,
                                        DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2};
const std::vector<DType> kIntTypes = {DType::kInt8,   DType::kInt16, DType::kInt32,
                                      DType::kInt64,  DType::kUInt8, DType::kUInt16,
                                      DType::kUInt32, DType::kUInt64};

// "For each slice i, it reverses the first seq_lengths[i] elements along the
// dimension specified in the seq_axis attribute."
TEST(ReverseSequenceSpec, ExactValuesDefaultAxes) {
  const TestTensor data = Rows();
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {3, 4}, {4, 3, 2, 1, 6, 5, 7, 8, 9, 10, 11, 12}),
                      RunOp("ReverseSequence", {data, Vec(DType::kInt64, {4, 2, 1})})));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {3, 4}, {4, 3, 2, 1, 6, 5, 7, 8, 9, 10, 11, 12}),
                      RunOp("ReverseSequence", {data, Vec(DType::kInt64, {4, 2, 1})}, Axes(0, 1))));
}

TEST(ReverseSequenceSpec, ExactValuesBatchAxisOne) {
  // batch_axis 1, seq_axis 0: columns are the batch, rows the sequence.
  const TestTensor data = Rows();
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {3, 4}, {9, 6, 3, 4, 5, 2, 7, 8, 1, 10, 11, 12}),
              RunOp("ReverseSequence", {data, Vec(DType::kInt32, {3, 2, 0, 1})}, Axes(1, 0))));
}

// "Default value: 0" (batch_axis), "Default value: 1" (seq_axis).
TEST(ReverseSequenceSpec, Defaults) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  const TestTensor data = RandomTensor(DType::kFloat32, {3, 5, 2}, &rng);
  const std::vector<int64_t> lens = {5, 0, 3};
  const TestTensor expected = ReferenceReverseSequence(data, 0, 1, lens);
  EXPECT_TRUE(Matches(expected, RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens)})));
  EXPECT_TRUE(Matches(expected, RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens)},
                                      {{"batch_axis", Int(0)}})));
  EXPECT_TRUE(Matches(expected, RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens)},
                                      {{"seq_axis", Int(1)}})));
  // seq_axis alone: batch_axis stays 0.
  const std::vector<int64_t> lens2 = {2, 1, 2};
  EXPECT_TRUE(
      Matches(ReferenceReverseSequence(data, 0, 2, lens2),
              RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens2)}, {{"seq_axis", Int(2)}})));
  // batch_axis alone: seq_axis stays 1.
  const std::vector<int64_t> lens3 = {4, 5};
  EXPECT_TRUE(Matches(
      ReferenceReverseSequence(data, 2, 1, lens3),
      RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens3)}, {{"batch_axis", Int(2)}})));
}

TEST(ReverseSequenceSemantics, DefaultsCollideWhenOnlyOneGiven) {
  const TestTensor data = FromInt64(DType::kInt32, {3, 3}, std::vector<int64_t>(9, 1));
  // batch_axis 1 with the default seq_axis 1.
  EXPECT_INVALID(
      RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})}, {{"batch_axis", Int(1)}}),
      "ReverseSequence", "batch_axis", "seq_axis");
  // seq_axis 0 with the default batch_axis 0.
  EXPECT_INVALID(
      RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})}, {{"seq_axis", Int(0)}}),
      "ReverseSequence", "batch_axis", "seq_axis");
}

// "Range of values: an integer within the range [-rank(data), rank(data) - 1]"
TEST(ReverseSequenceSpec, NegativeAxes) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(2));
  const TestTensor data = RandomTensor(DType::kInt16, {2, 3, 4}, &rng);
  for (int64_t b = -3; b <= 2; ++b) {
    for (int64_t s = -3; s <= 2; ++s) {
      const int64_t nb = b < 0 ? b + 3 : b;
      const int64_t ns = s < 0 ? s + 3 : s;
      if (nb == ns) continue;
      SCOPED_TRACE(absl::StrCat("batch_axis=", b, " seq_axis=", s));
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < data.shape[nb]; ++i)
        lens.push_back((i * 7 + 1) % (data.shape[ns] + 1));
      EXPECT_TRUE(Matches(ReferenceReverseSequence(data, nb, ns, lens),
                          RunOp("ReverseSequence", {data, Vec(DType::kInt64, lens)}, Axes(b, s))));
    }
  }
}

TEST(ReverseSequenceSpec, AxesOutOfRangeRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {2, 3, 4}, std::vector<int64_t>(24, 1));
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(3, 1)),
                 "ReverseSequence", "batch_axis", "3");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(-4, 1)),
                 "ReverseSequence", "batch_axis", "-4");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(0, 13)),
                 "ReverseSequence", "seq_axis", "13");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(0, -5)),
                 "ReverseSequence", "seq_axis", "-5");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(0, 1LL << 40)),
                 "ReverseSequence", "seq_axis");
}

// semantics: "after normalising they must differ."
TEST(ReverseSequenceSemantics, EqualAxesRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {2, 3, 4}, std::vector<int64_t>(24, 1));
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(0, 0)),
                 "ReverseSequence", "batch_axis", "seq_axis");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}, Axes(0, -3)),
                 "ReverseSequence", "batch_axis", "seq_axis");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1, 1})}, Axes(-1, 2)),
                 "ReverseSequence", "batch_axis", "seq_axis");
}

// "data - ... A tensor of type T1 and rank greater or equal to 2."
TEST(ReverseSequenceSpec, RankBelowTwoRejected) {
  EXPECT_INVALID(
      RunOp("ReverseSequence",
            {FromInt64(DType::kInt32, {4}, {1, 2, 3, 4}), Vec(DType::kInt64, {4})}, Axes(0, 0)),
      "ReverseSequence", "data");
  EXPECT_INVALID(RunOp("ReverseSequence",
                       {FromInt64(DType::kInt32, {4}, {1, 2, 3, 4}), Vec(DType::kInt64, {4})}),
                 "ReverseSequence", "data");
  EXPECT_INVALID(
      RunOp("ReverseSequence", {FromInt64(DType::kInt32, {}, {1}), Vec(DType::kInt64, {1})}),
      "ReverseSequence", "data");
}

// "A 1D tensor comprising data_shape[batch_axis] elements"
TEST(ReverseSequenceSpec, SeqLengthsShapeChecked) {
  const TestTensor data = Rows();  // [3,4]
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1})}), "ReverseSequence",
                 "seq_lengths", "2");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1, 1})}),
                 "ReverseSequence", "seq_lengths", "4");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {})}), "ReverseSequence",
                 "seq_lengths");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, ScalarOf(DType::kInt64, 1)}), "ReverseSequence",
                 "seq_lengths");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromInt64(DType::kInt64, {3, 1}, {1, 1, 1})}),
                 "ReverseSequence", "seq_lengths");
  // With batch_axis 1 the count is data_shape[1] = 4.
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})}, Axes(1, 0)),
                 "ReverseSequence", "seq_lengths", "3");
}

// "All element values must be integer values within the range [1, data_shape[seq_axis]].
//  Value 1 means, no elements are reversed." semantics: 0 also reverses nothing.
TEST(ReverseSequenceSemantics, ZeroAndOneReverseNothing) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(3));
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = RandomTensor(dt, {3, 5}, &rng);
    EXPECT_TRUE(Matches(data, RunOp("ReverseSequence", {data, Vec(DType::kInt64, {0, 1, 0})})));
    EXPECT_TRUE(Matches(data, RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})})));
    EXPECT_TRUE(Matches(ReferenceReverseSequence(data, 0, 1, {0, 5, 1}),
                        RunOp("ReverseSequence", {data, Vec(DType::kInt64, {0, 5, 1})})));
  }
}

TEST(ReverseSequenceSemantics, LengthAboveDimRejected) {
  const TestTensor data = Rows();  // seq dim 4
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {4, 5, 1})}), "ReverseSequence",
                 "seq_lengths", "[1]", "5");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kUInt8, {1, 1, 200})}),
                 "ReverseSequence", "seq_lengths", "[2]", "200");
  EXPECT_INVALID(RunOp("ReverseSequence",
                       {data, FromUInt64(DType::kUInt64, {3}, {0, 18446744073709551615ull, 0})}),
                 "ReverseSequence", "seq_lengths", "[1]");
  EXPECT_INVALID(RunOp("ReverseSequence",
                       {data, Vec(DType::kInt64, {std::numeric_limits<int64_t>::max(), 1, 1})}),
                 "ReverseSequence", "seq_lengths", "[0]");
}

TEST(ReverseSequenceSemantics, NegativeLengthRejected) {
  const TestTensor data = Rows();
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(t, {1, -1, 1})}), "ReverseSequence",
                   "seq_lengths", "[1]", "-1");
  }
  EXPECT_INVALID(RunOp("ReverseSequence",
                       {data, Vec(DType::kInt64, {std::numeric_limits<int64_t>::min(), 1, 1})}),
                 "ReverseSequence", "seq_lengths", "[0]");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(DType::kFloat32, {3}, {1, 2, -3})}),
                 "ReverseSequence", "seq_lengths", "[2]", "-3");
}

// "T2: any supported numerical type." semantics: any integer or floating type.
TEST(ReverseSequenceSemantics, IntegerLengthTypesAccepted) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(4));
  const TestTensor data = RandomTensor(DType::kFloat64, {3, 4, 2}, &rng);
  for (DType t : kIntTypes) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_TRUE(Matches(ReferenceReverseSequence(data, 0, 1, {4, 2, 3}),
                        RunOp("ReverseSequence", {data, Vec(t, {4, 2, 3})})));
  }
}

TEST(ReverseSequenceSemantics, WholeFloatLengthsAccepted) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(5));
  const TestTensor data = RandomTensor(DType::kInt32, {4, 6}, &rng);
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_TRUE(Matches(ReferenceReverseSequence(data, 0, 1, {6, 2, 0, 3}),
                        RunOp("ReverseSequence", {data, FromDouble(t, {4}, {6, 2, 0, 3})})));
    // -0.0 is the whole number 0.
    EXPECT_TRUE(Matches(ReferenceReverseSequence(data, 0, 1, {0, 4, 1, 5}),
                        RunOp("ReverseSequence", {data, FromDouble(t, {4}, {-0.0, 4, 1, 5})})));
  }
}

// semantics: "A fractional ... value is rejected and the message names its index."
TEST(ReverseSequenceSemantics, FractionalLengthRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {3, 4}, std::vector<int64_t>(12, 0));
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(t, {3}, {2, 3, 1.5})}),
                   "ReverseSequence", "seq_lengths", "[2]", "1.5");
    EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(t, {3}, {0.5, 3, 1})}),
                   "ReverseSequence", "seq_lengths", "[0]", "0.5");
  }
  EXPECT_INVALID(
      RunOp("ReverseSequence", {data, FromDouble(DType::kFloat64, {3}, {2, 3.000001, 1})}),
      "ReverseSequence", "seq_lengths", "[1]");
}

TEST(ReverseSequenceSemantics, NonFiniteAndHugeFloatLengthsRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {3, 4}, std::vector<int64_t>(12, 0));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(t, {3}, {1, nan, 1})}),
                   "ReverseSequence", "seq_lengths", "[1]");
    if (t != DType::kFloat8E4M3) {  // E4M3FN has no infinity
      EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(t, {3}, {1, 1, inf})}),
                     "ReverseSequence", "seq_lengths", "[2]");
      EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(t, {3}, {-inf, 1, 1})}),
                     "ReverseSequence", "seq_lengths", "[0]");
    }
  }
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(DType::kFloat32, {3}, {1, 1e30, 1})}),
                 "ReverseSequence", "seq_lengths", "[1]");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(DType::kFloat64, {3}, {1, 1, -1e300})}),
                 "ReverseSequence", "seq_lengths", "[2]");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(DType::kFloat64, {3}, {1, 1, 1e19})}),
                 "ReverseSequence", "seq_lengths", "[2]");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, FromDouble(DType::kFloat16, {3}, {1, 5, 1})}),
                 "ReverseSequence", "seq_lengths", "[1]", "5");
}

// semantics: "(not BOOL)"; STRING and COMPLEX are not numbers of that kind either.
TEST(ReverseSequenceSemantics, NonNumericLengthTypesRejected) {
  const TestTensor data = Rows();
  for (DType t : {DType::kBool, DType::kString, DType::kComplex64, DType::kComplex128}) {
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(t, {1, 1, 1})}), "ReverseSequence",
                   "seq_lengths", std::string(DTypeName(t)));
  }
}

// "1: The result ... A tensor of type T1 and the same shape as data input tensor."
TEST(ReverseSequenceSemantics, AllElementTypes) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    std::mt19937_64 rng(::tensorops::testing::TestSeed(100 + static_cast<uint64_t>(dt)));
    const TestTensor data = RandomTensor(dt, {3, 5, 4}, &rng);
    struct Case {
      int64_t batch, seq;
      std::vector<int64_t> lens;
    };
    for (const Case& c : std::vector<Case>{{0, 1, {5, 0, 3}},
                                           {0, 2, {4, 2, 1}},
                                           {2, 1, {5, 4, 3, 2}},
                                           {1, 0, {3, 2, 1, 0, 3}},
                                           {-1, -3, {1, 3, 2, 2}},
                                           {1, 2, {4, 4, 4, 4, 4}}}) {
      SCOPED_TRACE(absl::StrCat("batch_axis=", c.batch, " seq_axis=", c.seq,
                                " seq_lengths=", VecToString(c.lens)));
      const absl::StatusOr<Tensor> got =
          RunOp("ReverseSequence", {data, Vec(DType::kInt64, c.lens)}, Axes(c.batch, c.seq));
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->dtype(), dt);
      EXPECT_TRUE(Matches(ReferenceReverseSequence(data, c.batch, c.seq, c.lens), got));
    }
  }
}

TEST(ReverseSequenceSemantics, StringAndNaNBitsKept) {
  const TestTensor s = FromStrings({2, 3}, {"a", "", std::string("\0\0", 2), "dd", "e", "ff"});
  EXPECT_TRUE(Matches(FromStrings({2, 3}, {std::string("\0\0", 2), "", "a", "e", "dd", "ff"}),
                      RunOp("ReverseSequence", {s, Vec(DType::kInt64, {3, 2})})));
  const TestTensor f = FromBits(DType::kFloat32, {1, 4}, {0x7FC00001, 0x80000000, 0xFF800001, 1});
  EXPECT_TRUE(Matches(FromBits(DType::kFloat32, {1, 4}, {0xFF800001, 0x80000000, 0x7FC00001, 1}),
                      RunOp("ReverseSequence", {f, Vec(DType::kInt32, {3})})));
  const TestTensor c = FromBits(DType::kComplex64, {1, 2}, {0x800000007FC00001ull, 7});
  EXPECT_TRUE(Matches(FromBits(DType::kComplex64, {1, 2}, {7, 0x800000007FC00001ull}),
                      RunOp("ReverseSequence", {c, Vec(DType::kInt32, {2})})));
}

// semantics: zero-size dimensions give an empty output of the same shape.
TEST(ReverseSequenceSemantics, ZeroSizeDims) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    // Empty sequence axis: every length must be 0.
    const TestTensor a = Zeros(dt, {3, 0});
    EXPECT_TRUE(Matches(a, RunOp("ReverseSequence", {a, Vec(DType::kInt64, {0, 0, 0})})));
    // Empty batch axis: zero lengths.
    const TestTensor b = Zeros(dt, {0, 4});
    EXPECT_TRUE(Matches(b, RunOp("ReverseSequence", {b, Vec(DType::kInt64, {})})));
    // Empty other axis.
    const TestTensor c = Zeros(dt, {2, 3, 0});
    EXPECT_TRUE(Matches(c, RunOp("ReverseSequence", {c, Vec(DType::kInt64, {3, 2})})));
  }
  const TestTensor a = Zeros(DType::kInt32, {3, 0});
  EXPECT_INVALID(RunOp("ReverseSequence", {a, Vec(DType::kInt64, {0, 1, 0})}), "ReverseSequence",
                 "seq_lengths", "[1]");
}

// The XML example: data [4,10,100,200], seq_lengths [2, 4, 8, 10].
TEST(ReverseSequenceSpec, XmlExample) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(6));
  for (DType dt : {DType::kFloat32, DType::kInt8}) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = RandomTensor(dt, {4, 10, 100, 200}, &rng);
    const TestTensor lens = Vec(DType::kInt64, {2, 4, 8, 10});
    const TensorView views[] = {data.view(), lens.view()};
    const absl::StatusOr<Tensor> got = ExecuteOp(Builtins(), "ReverseSequence", views, Axes(0, 1));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->shape(), (Shape{4, 10, 100, 200}));
    EXPECT_TRUE(Matches(ReferenceReverseSequence(data, 0, 1, {2, 4, 8, 10}), got));
  }
}

TEST(ReverseSequenceSemantics, AliasReverseSequence1) {
  const TestTensor data = Rows();
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {3, 4}, {4, 3, 2, 1, 6, 5, 7, 8, 9, 10, 11, 12}),
                      RunOp("ReverseSequence-1", {data, Vec(DType::kInt64, {4, 2, 1})})));
  EXPECT_INVALID(RunOp("ReverseSequence-1", {data, Vec(DType::kInt64, {4, 2, 9})}),
                 "ReverseSequence", "seq_lengths", "9");
}

// semantics "Wire behaviour": an attribute of the wrong kind is INVALID_ARGUMENT.
TEST(ReverseSequenceSemantics, AttributeOfWrongKindRejected) {
  const TestTensor data = Rows();
  for (const std::string name : {"batch_axis", "seq_axis"}) {
    for (AttrValue v :
         {AttrValue::String("0"), AttrValue::Number(0.5), AttrValue::Number(1.5),
          AttrValue::Bool(false), AttrValue::OfKind(AttrValue::Kind::kList),
          AttrValue::OfKind(AttrValue::Kind::kStruct), AttrValue::OfKind(AttrValue::Kind::kNull),
          AttrValue::Number(std::numeric_limits<double>::quiet_NaN()),
          AttrValue::Number(std::numeric_limits<double>::infinity()), AttrValue::Number(1e300)}) {
      SCOPED_TRACE(absl::StrCat(name, " ", AttrKindName(v.kind), " ", v.number));
      EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})}, {{name, v}}),
                     "ReverseSequence", name);
    }
  }
}

TEST(ReverseSequenceSemantics, UnknownAttributeRejected) {
  const TestTensor data = Rows();
  EXPECT_INVALID(
      RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})}, {{"time_axis", Int(1)}}),
      "ReverseSequence", "time_axis");
  EXPECT_INVALID(RunOp("ReverseSequence", {data, Vec(DType::kInt64, {1, 1, 1})},
                       {{"batch_axis", Int(0)}, {"mode", Str("index")}}),
                 "ReverseSequence", "mode");
}

TEST(ReverseSequenceSemantics, WrongNumberOfInputsRejected) {
  const TestTensor data = Rows();
  EXPECT_INVALID(RunOp("ReverseSequence", {}), "ReverseSequence");
  EXPECT_INVALID(RunOp("ReverseSequence", {data}), "ReverseSequence");
  EXPECT_INVALID(RunOp("ReverseSequence",
                       {data, Vec(DType::kInt64, {1, 1, 1}), Vec(DType::kInt64, {1, 1, 1})}),
                 "ReverseSequence");
}

}  // namespace
}  // namespace test
}  // namespace tensorops
