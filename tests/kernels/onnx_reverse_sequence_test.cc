// onnx.ReverseSequence: every sentence of specs/onnx-ReverseSequence.txt and
// every rule of semantics.md "ONNX ReverseSequence" as a case.
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

constexpr char kOp[] = "onnx.ReverseSequence";

Attrs Axes(int64_t batch_axis, int64_t time_axis) {
  return {{"batch_axis", Int(batch_axis)}, {"time_axis", Int(time_axis)}};
}

// "For each slice i iterating on batch axis, the operator reverses the first
// sequence_lens[i] elements on time axis, and copies elements whose index's
// beyond sequence_lens[i] to the output."  (ONNX's own two examples.)
TEST(OnnxReverseSequenceSpec, TimeMajorExample) {
  const TestTensor input =
      FromDouble(DType::kFloat32, {4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
  const TestTensor expected =
      FromDouble(DType::kFloat32, {4, 4}, {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15});
  EXPECT_TRUE(Matches(expected, RunOp(kOp, {input, Vec(DType::kInt64, {4, 3, 2, 1})}, Axes(1, 0))));
  // The defaults are batch_axis 1, time_axis 0.
  EXPECT_TRUE(Matches(expected, RunOp(kOp, {input, Vec(DType::kInt64, {4, 3, 2, 1})})));
  EXPECT_TRUE(Matches(
      expected, RunOp(kOp, {input, Vec(DType::kInt64, {4, 3, 2, 1})}, {{"batch_axis", Int(1)}})));
  EXPECT_TRUE(Matches(
      expected, RunOp(kOp, {input, Vec(DType::kInt64, {4, 3, 2, 1})}, {{"time_axis", Int(0)}})));
}

TEST(OnnxReverseSequenceSpec, BatchMajorExample) {
  const TestTensor input =
      FromDouble(DType::kFloat32, {4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  const TestTensor expected =
      FromDouble(DType::kFloat32, {4, 4}, {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});
  EXPECT_TRUE(Matches(expected, RunOp(kOp, {input, Vec(DType::kInt64, {1, 2, 3, 4})}, Axes(0, 1))));
  // Setting both away from their defaults one at a time would collide.
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 2, 3, 4})}, {{"batch_axis", Int(0)}}),
                 "ReverseSequence", "batch_axis", "time_axis");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 2, 3, 4})}, {{"time_axis", Int(1)}}),
                 "ReverseSequence", "batch_axis", "time_axis");
}

// "So the output slice i contains reversed sequences on the first
// sequence_lens[i] elements, then have original values copied for the other elements."
TEST(OnnxReverseSequenceSpec, HigherRank) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  const TestTensor input = RandomTensor(DType::kInt16, {5, 3, 2, 4}, &rng);
  const std::vector<int64_t> lens = {5, 0, 2};
  EXPECT_TRUE(Matches(ReferenceOnnxReverseSequence(input, 1, 0, lens),
                      RunOp(kOp, {input, Vec(DType::kInt64, lens)})));
  const TestTensor input2 = RandomTensor(DType::kInt16, {3, 5, 2, 4}, &rng);
  EXPECT_TRUE(Matches(ReferenceOnnxReverseSequence(input2, 0, 1, lens),
                      RunOp(kOp, {input2, Vec(DType::kInt64, lens)}, Axes(0, 1))));
}

// "batch_axis : integer ... Must be one of 1, or 0." "time_axis ... Must be one of 0, or 1."
TEST(OnnxReverseSequenceSemantics, AxesMustBeZeroOrOne) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2, 3}, std::vector<int64_t>(12, 0));
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1, 1})}, Axes(2, 0)), "ReverseSequence",
                 "batch_axis", "2");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, Axes(1, 2)), "ReverseSequence",
                 "time_axis", "2");
  // Negative values are not normalised here: ONNX allows only 0 and 1.
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, Axes(-2, 1)), "ReverseSequence",
                 "batch_axis", "-2");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, Axes(1, -1)), "ReverseSequence",
                 "time_axis", "-1");
  const TestTensor square = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  EXPECT_INVALID(RunOp(kOp, {square, Vec(DType::kInt64, {1, 1})}, Axes(-1, 0)), "ReverseSequence",
                 "batch_axis", "-1");
}

// semantics: "and they must differ."
TEST(OnnxReverseSequenceSemantics, AxesMustDiffer) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, Axes(0, 0)), "ReverseSequence",
                 "batch_axis", "time_axis");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, Axes(1, 1)), "ReverseSequence",
                 "batch_axis", "time_axis");
}

// "input ... tensor of rank r >= 2."
TEST(OnnxReverseSequenceSpec, RankBelowTwoRejected) {
  EXPECT_INVALID(RunOp(kOp, {FromInt64(DType::kInt32, {3}, {1, 2, 3}), Vec(DType::kInt64, {3})}),
                 "ReverseSequence", "input");
  EXPECT_INVALID(RunOp(kOp, {FromInt64(DType::kInt32, {}, {1}), Vec(DType::kInt64, {1})}),
                 "ReverseSequence", "input");
}

// "sequence_lens ... tensor(int64) ... It has shape [batch_size]."
// semantics: "1-D INT64 (INT32 is also accepted)".
TEST(OnnxReverseSequenceSemantics, SequenceLensTypes) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(2));
  const TestTensor input = RandomTensor(DType::kFloat64, {4, 3}, &rng);
  const TestTensor expected = ReferenceOnnxReverseSequence(input, 1, 0, {4, 2, 0});
  EXPECT_TRUE(Matches(expected, RunOp(kOp, {input, Vec(DType::kInt64, {4, 2, 0})})));
  EXPECT_TRUE(Matches(expected, RunOp(kOp, {input, Vec(DType::kInt32, {4, 2, 0})})));
  for (DType t : AllDTypes()) {
    if (t == DType::kInt32 || t == DType::kInt64) continue;
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp(kOp, {input, Vec(t, {1, 1, 1})}), "ReverseSequence", "sequence_lens",
                   std::string(DTypeName(t)));
  }
}

TEST(OnnxReverseSequenceSemantics, SequenceLensShape) {
  const TestTensor input = FromInt64(DType::kInt32, {4, 3}, std::vector<int64_t>(12, 0));
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}), "ReverseSequence",
                 "sequence_lens", "2");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1, 1, 1})}), "ReverseSequence",
                 "sequence_lens", "4");
  EXPECT_INVALID(RunOp(kOp, {input, ScalarOf(DType::kInt64, 1)}), "ReverseSequence",
                 "sequence_lens");
  EXPECT_INVALID(RunOp(kOp, {input, FromInt64(DType::kInt64, {1, 3}, {1, 1, 1})}),
                 "ReverseSequence", "sequence_lens");
  // batch_axis 0: the count is data_shape[0] = 4.
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1, 1})}, Axes(0, 1)), "ReverseSequence",
                 "sequence_lens", "3");
}

// semantics: "each in [0, data_shape[time_axis]]".
TEST(OnnxReverseSequenceSemantics, SequenceLensRange) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(3));
  const TestTensor input = RandomTensor(DType::kUInt32, {4, 3}, &rng);  // time 4, batch 3
  EXPECT_TRUE(Matches(input, RunOp(kOp, {input, Vec(DType::kInt64, {0, 1, 0})})));
  EXPECT_TRUE(Matches(ReferenceOnnxReverseSequence(input, 1, 0, {4, 4, 4}),
                      RunOp(kOp, {input, Vec(DType::kInt64, {4, 4, 4})})));
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 5, 1})}), "ReverseSequence",
                 "sequence_lens", "[1]", "5");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt32, {1, 1, -1})}), "ReverseSequence",
                 "sequence_lens", "[2]", "-1");
  EXPECT_INVALID(
      RunOp(kOp, {input, Vec(DType::kInt64, {std::numeric_limits<int64_t>::min(), 1, 1})}),
      "ReverseSequence", "sequence_lens", "[0]");
  EXPECT_INVALID(
      RunOp(kOp, {input, Vec(DType::kInt32, {1, std::numeric_limits<int32_t>::max(), 1})}),
      "ReverseSequence", "sequence_lens", "[1]");
}

// "T in (...) : Input and output types can be of any tensor type."
// semantics: "Element types as above, STRING and COMPLEX included."
TEST(OnnxReverseSequenceSemantics, AllElementTypes) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    std::mt19937_64 rng(::tensorops::testing::TestSeed(300 + static_cast<uint64_t>(dt)));
    const TestTensor input = RandomTensor(dt, {5, 3, 2}, &rng);
    const absl::StatusOr<Tensor> got = RunOp(kOp, {input, Vec(DType::kInt64, {5, 1, 3})});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->dtype(), dt);
    EXPECT_TRUE(Matches(ReferenceOnnxReverseSequence(input, 1, 0, {5, 1, 3}), got));
    EXPECT_TRUE(Matches(ReferenceOnnxReverseSequence(input, 0, 1, {3, 0, 2, 2, 1}),
                        RunOp(kOp, {input, Vec(DType::kInt32, {3, 0, 2, 2, 1})}, Axes(0, 1))));
  }
}

TEST(OnnxReverseSequenceSemantics, StringComplexAndNaNBitsKept) {
  const TestTensor s = FromStrings({3, 1}, {"first", "", std::string("\0third", 6)});
  EXPECT_TRUE(Matches(FromStrings({3, 1}, {std::string("\0third", 6), "", "first"}),
                      RunOp(kOp, {s, Vec(DType::kInt64, {3})})));
  const TestTensor c = FromBits(DType::kComplex64, {2, 1}, {0x800000007FC00001ull, 9});
  EXPECT_TRUE(Matches(FromBits(DType::kComplex64, {2, 1}, {9, 0x800000007FC00001ull}),
                      RunOp(kOp, {c, Vec(DType::kInt64, {2})})));
  const TestTensor f =
      FromBits(DType::kFloat64, {2, 1}, {0x7FF0000000000001ull, 0x8000000000000000ull});
  EXPECT_TRUE(
      Matches(FromBits(DType::kFloat64, {2, 1}, {0x8000000000000000ull, 0x7FF0000000000001ull}),
              RunOp(kOp, {f, Vec(DType::kInt32, {2})})));
}

TEST(OnnxReverseSequenceSemantics, ZeroSizeDims) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor no_time = Zeros(dt, {0, 3});
    EXPECT_TRUE(Matches(no_time, RunOp(kOp, {no_time, Vec(DType::kInt64, {0, 0, 0})})));
    const TestTensor no_batch = Zeros(dt, {3, 0});
    EXPECT_TRUE(Matches(no_batch, RunOp(kOp, {no_batch, Vec(DType::kInt64, {})})));
    const TestTensor no_inner = Zeros(dt, {3, 2, 0});
    EXPECT_TRUE(Matches(no_inner, RunOp(kOp, {no_inner, Vec(DType::kInt64, {3, 1})})));
  }
}

TEST(OnnxReverseSequenceSemantics, AttributeOfWrongKindRejected) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  for (const std::string name : {"batch_axis", "time_axis"}) {
    for (AttrValue v :
         {AttrValue::String("1"), AttrValue::Number(0.5), AttrValue::Bool(true),
          AttrValue::OfKind(AttrValue::Kind::kList), AttrValue::OfKind(AttrValue::Kind::kStruct),
          AttrValue::OfKind(AttrValue::Kind::kNull)}) {
      SCOPED_TRACE(absl::StrCat(name, " ", AttrKindName(v.kind)));
      EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, {{name, v}}),
                     "ReverseSequence", name);
    }
  }
}

// The spec page also lists LabVIEW-only parameters (training, lda coeff, name);
// semantics.md defines only batch_axis and time_axis, so the rest are unknown.
TEST(OnnxReverseSequenceSemantics, UnknownAttributeRejected) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  for (const std::string name : {"seq_axis", "training", "name", "mode"}) {
    SCOPED_TRACE(name);
    EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1})}, {{name, Int(0)}}),
                   "ReverseSequence", name);
  }
}

TEST(OnnxReverseSequenceSemantics, DistinctFromOpenVinoReverseSequence) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  // "ReverseSequence" is the OpenVINO op, with OpenVINO defaults (batch 0, seq 1).
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 2}, {2, 1, 3, 4}),
                      RunOp("ReverseSequence", {input, Vec(DType::kInt64, {2, 1})})));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 2}, {3, 2, 1, 4}),
                      RunOp(kOp, {input, Vec(DType::kInt64, {2, 1})})));
}

TEST(OnnxReverseSequenceSemantics, WrongNumberOfInputsRejected) {
  const TestTensor input = FromInt64(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  EXPECT_INVALID(RunOp(kOp, {}), "ReverseSequence");
  EXPECT_INVALID(RunOp(kOp, {input}), "ReverseSequence");
  EXPECT_INVALID(RunOp(kOp, {input, Vec(DType::kInt64, {1, 1}), Vec(DType::kInt64, {1, 1})}),
                 "ReverseSequence");
}

}  // namespace
}  // namespace test
}  // namespace tensorops
