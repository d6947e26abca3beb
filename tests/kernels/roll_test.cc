// Roll-7: every sentence of specs/openvino-Roll-7.txt and every rule of
// semantics.md "Roll-7" as a case.
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

constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();

const std::vector<int64_t> kExampleData = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

TestTensor ExampleData(DType dt = DType::kInt32) { return FromInt64(dt, {4, 3}, kExampleData); }

// The oracle itself must reproduce the spec's examples.
TEST(RollReference, MatchesSpecExamples) {
  const TestTensor data = ExampleData();
  EXPECT_EQ(ToInt64(ReferenceRoll(data, {1}, {0}).view()),
            (std::vector<int64_t>{10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(ToInt64(ReferenceRoll(data, {-1, 2}, {0, 1}).view()),
            (std::vector<int64_t>{5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1}));
  EXPECT_EQ(ToInt64(ReferenceRoll(data, {1, 2, 1}, {0, 1, 0}).view()),
            (std::vector<int64_t>{8, 9, 7, 11, 12, 10, 2, 3, 1, 5, 6, 4}));
}

// "Example 1. Roll output with shift = 1, axes = 0"
TEST(RollSpec, Example1) {
  const std::vector<int64_t> expected = {10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = ExampleData(dt);
    const TestTensor want = FromInt64(dt, {4, 3}, expected);
    // Scalars, as the example is written, and 1-D of both index types.
    EXPECT_TRUE(Matches(
        want, RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)})));
    EXPECT_TRUE(Matches(
        want, RunOp("Roll", {data, ScalarOf(DType::kInt32, 1), ScalarOf(DType::kInt32, 0)})));
    EXPECT_TRUE(
        Matches(want, RunOp("Roll", {data, Vec(DType::kInt64, {1}), Vec(DType::kInt32, {0})})));
  }
  const absl::StatusOr<Tensor> got =
      RunOp("Roll", {ExampleData(), ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ToInt64(got->view()), expected);
}

// "Example 2. Roll output with shift = [-1, 2], axes = [0, 1]"
TEST(RollSpec, Example2) {
  const std::vector<int64_t> expected = {5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1};
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = ExampleData(dt);
    EXPECT_TRUE(
        Matches(FromInt64(dt, {4, 3}, expected),
                RunOp("Roll", {data, Vec(DType::kInt64, {-1, 2}), Vec(DType::kInt64, {0, 1})})));
  }
  const absl::StatusOr<Tensor> got =
      RunOp("Roll", {ExampleData(), Vec(DType::kInt32, {-1, 2}), Vec(DType::kInt64, {0, 1})});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ToInt64(got->view()), expected);
}

// "Example 3. Roll output with shift = [1, 2, 1], axes = [0, 1, 0]"
TEST(RollSpec, Example3) {
  const std::vector<int64_t> expected = {8, 9, 7, 11, 12, 10, 2, 3, 1, 5, 6, 4};
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor data = ExampleData(dt);
    EXPECT_TRUE(Matches(
        FromInt64(dt, {4, 3}, expected),
        RunOp("Roll", {data, Vec(DType::kInt64, {1, 2, 1}), Vec(DType::kInt64, {0, 1, 0})})));
  }
  const absl::StatusOr<Tensor> got =
      RunOp("Roll", {ExampleData(), Vec(DType::kInt64, {1, 2, 1}), Vec(DType::kInt32, {0, 1, 0})});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ToInt64(got->view()), expected);
}

// "Elements that are shifted beyond the last position will be added in the
// same order starting from the first position." "If the value of shift is
// positive, elements are shifted positively (towards larger indices).
// Otherwise, elements are shifted negatively (towards smaller indices)."
TEST(RollSpec, DirectionAndWrap) {
  const TestTensor data = FromInt64(DType::kInt64, {5}, {1, 2, 3, 4, 5});
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt64, {5}, {4, 5, 1, 2, 3}),
              RunOp("Roll", {data, ScalarOf(DType::kInt64, 2), ScalarOf(DType::kInt64, 0)})));
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt64, {5}, {3, 4, 5, 1, 2}),
              RunOp("Roll", {data, ScalarOf(DType::kInt64, -2), ScalarOf(DType::kInt64, 0)})));
  EXPECT_TRUE(
      Matches(data, RunOp("Roll", {data, ScalarOf(DType::kInt64, 0), ScalarOf(DType::kInt64, 0)})));
  EXPECT_TRUE(
      Matches(data, RunOp("Roll", {data, ScalarOf(DType::kInt64, 5), ScalarOf(DType::kInt64, 0)})));
}

// "If shift is a scalar, each dimension specified in the axes tensor are rolled
// by the same shift value." semantics: "A scalar shift, or a 1-D shift of one
// element, applies to every axis listed (the spec's Example 2)."
TEST(RollSpec, ScalarShiftAppliesToEveryAxis) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  const TestTensor data = RandomTensor(DType::kFloat32, {3, 4, 5}, &rng);
  const TestTensor expected = ReferenceRoll(data, {2, 2, 2}, {0, 1, 2});
  EXPECT_TRUE(Matches(
      expected, RunOp("Roll", {data, ScalarOf(DType::kInt64, 2), Vec(DType::kInt64, {0, 1, 2})})));
  EXPECT_TRUE(Matches(
      expected, RunOp("Roll", {data, ScalarOf(DType::kInt32, 2), Vec(DType::kInt32, {0, 1, 2})})));
  EXPECT_TRUE(Matches(
      expected, RunOp("Roll", {data, Vec(DType::kInt64, {2}), Vec(DType::kInt64, {0, 1, 2})})));
  EXPECT_TRUE(Matches(
      expected, RunOp("Roll", {data, Vec(DType::kInt32, {2}), Vec(DType::kInt64, {-3, -2, -1})})));
  // Exact: [[1,2,3],[4,5,6]] rolled by 1 on both axes.
  const TestTensor small = FromInt64(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {2, 3}, {6, 4, 5, 3, 1, 2}),
              RunOp("Roll", {small, ScalarOf(DType::kInt64, 1), Vec(DType::kInt64, {0, 1})})));
  EXPECT_TRUE(Matches(FromInt64(DType::kInt32, {2, 3}, {6, 4, 5, 3, 1, 2}),
                      RunOp("Roll", {small, Vec(DType::kInt64, {1}), Vec(DType::kInt64, {0, 1})})));
}

// "If shift is a 1D tensor, axes must be a 1D tensor of the same size"
TEST(RollSpec, ShiftAndAxesLengthMismatchRejected) {
  const TestTensor data = ExampleData();
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1, 2}), Vec(DType::kInt64, {0, 1, 0})}),
                 "Roll", "shift", "axes");
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1, 2, 3}), Vec(DType::kInt64, {0, 1})}),
                 "Roll", "shift", "axes");
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1, 2}), ScalarOf(DType::kInt64, 0)}),
                 "Roll", "shift", "axes");
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {}), Vec(DType::kInt64, {0})}), "Roll",
                 "shift", "axes");
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1, 1}), Vec(DType::kInt64, {})}), "Roll",
                 "shift", "axes");
}

// "2: a shift scalar or 1D tensor"; "3: axes a scalar or 1D tensor"
TEST(RollSpec, ShiftAndAxesRankAtMostOne) {
  const TestTensor data = ExampleData();
  EXPECT_INVALID(
      RunOp("Roll", {data, FromInt64(DType::kInt64, {1, 1}, {1}), Vec(DType::kInt64, {0})}), "Roll",
      "shift");
  EXPECT_INVALID(
      RunOp("Roll", {data, Vec(DType::kInt64, {1}), FromInt64(DType::kInt64, {1, 1}, {0})}), "Roll",
      "axes");
  EXPECT_INVALID(
      RunOp("Roll", {data, FromInt64(DType::kInt64, {2, 1}, {1, 1}), Vec(DType::kInt64, {0, 1})}),
      "Roll", "shift");
}

// "T_IND_1: int32 or int64." "T_IND_2: int32 or int64."
TEST(RollSpec, IndexTypes) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(2));
  const TestTensor data = RandomTensor(DType::kUInt16, {3, 4}, &rng);
  const TestTensor expected = ReferenceRoll(data, {1, -2}, {0, 1});
  for (DType st : {DType::kInt32, DType::kInt64}) {
    for (DType at : {DType::kInt32, DType::kInt64}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(st), " ", DTypeName(at)));
      EXPECT_TRUE(Matches(expected, RunOp("Roll", {data, Vec(st, {1, -2}), Vec(at, {0, 1})})));
    }
  }
  for (DType t : AllDTypes()) {
    if (t == DType::kInt32 || t == DType::kInt64) continue;
    SCOPED_TRACE(DTypeName(t));
    EXPECT_INVALID(RunOp("Roll", {data, Vec(t, {1}), Vec(DType::kInt64, {0})}), "Roll", "shift",
                   std::string(DTypeName(t)));
    EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1}), Vec(t, {0})}), "Roll", "axes",
                   std::string(DTypeName(t)));
  }
}

// "If the same axis is referenced more than once, the total shift for that axis
// will be the sum of all the shifts that belong to that axis."
TEST(RollSpec, DuplicateAxesSumShifts) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(3));
  const TestTensor data = RandomTensor(DType::kInt8, {4, 5, 6}, &rng);
  EXPECT_TRUE(
      Matches(ReferenceRoll(data, {3}, {1}),
              RunOp("Roll", {data, Vec(DType::kInt64, {1, 2}), Vec(DType::kInt64, {1, 1})})));
  // 1 and -2 name the same axis.
  EXPECT_TRUE(
      Matches(ReferenceRoll(data, {4}, {1}),
              RunOp("Roll", {data, Vec(DType::kInt64, {1, 3}), Vec(DType::kInt64, {1, -2})})));
  // Cancelling shifts give the input back.
  EXPECT_TRUE(Matches(
      data, RunOp("Roll", {data, Vec(DType::kInt64, {2, -2}), Vec(DType::kInt64, {0, -3})})));
  // A scalar shift on a repeated axis counts once per listing.
  EXPECT_TRUE(
      Matches(ReferenceRoll(data, {4}, {2}),
              RunOp("Roll", {data, ScalarOf(DType::kInt64, 2), Vec(DType::kInt64, {2, 2})})));
  const TestTensor line = FromInt64(DType::kInt32, {4}, {1, 2, 3, 4});
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {4}, {2, 3, 4, 1}),
              RunOp("Roll", {line, Vec(DType::kInt64, {1, 1, 1}), Vec(DType::kInt64, {0, 0, 0})})));
}

// "If axes has negative value, axis index will be calculated using the formula: N_dims + axis"
TEST(RollSpec, NegativeAxes) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(4));
  const TestTensor data = RandomTensor(DType::kFloat64, {2, 3, 4}, &rng);
  for (int64_t a = -3; a < 0; ++a) {
    SCOPED_TRACE(a);
    EXPECT_TRUE(
        Matches(ReferenceRoll(data, {1}, {a + 3}),
                RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, a)})));
  }
}

// semantics: "an axis outside [-rank, rank-1] is rejected."
TEST(RollSemantics, AxisOutOfRangeRejected) {
  const TestTensor data = FromInt64(DType::kInt32, {2, 3, 4}, std::vector<int64_t>(24, 0));
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1, 1}), Vec(DType::kInt64, {0, 3})}),
                 "Roll", "axes[1]", "3", "[-3, 2]");
  EXPECT_INVALID(RunOp("Roll", {data, Vec(DType::kInt64, {1}), Vec(DType::kInt64, {-4})}), "Roll",
                 "axes", "-4");
  EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt32, 11)}),
                 "Roll", "axes", "11");
  EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, kMin64)}),
                 "Roll", "axes");
  EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, kMax64)}),
                 "Roll", "axes");
}

// semantics: "Shifts wrap modulo the dimension and may be negative or larger
// than it: -7 on a dimension of 2 is 1."
TEST(RollSemantics, ShiftWrapsModuloDim) {
  const TestTensor pair = FromInt64(DType::kInt32, {2}, {1, 2});
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {2}, {2, 1}),
              RunOp("Roll", {pair, ScalarOf(DType::kInt64, -7), ScalarOf(DType::kInt64, 0)})));
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {2}, {2, 1}),
              RunOp("Roll", {pair, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)})));
  std::mt19937_64 rng(::tensorops::testing::TestSeed(5));
  const TestTensor data = RandomTensor(DType::kComplex64, {3, 7}, &rng);
  for (int64_t s : {-100, -22, -21, -8, -7, -1, 0, 1, 6, 7, 8, 13, 14, 1000003}) {
    SCOPED_TRACE(s);
    const int64_t eq = ((s % 7) + 7) % 7;
    EXPECT_TRUE(
        Matches(ReferenceRoll(data, {eq}, {1}),
                RunOp("Roll", {data, ScalarOf(DType::kInt64, s), ScalarOf(DType::kInt64, 1)})));
    EXPECT_TRUE(
        Matches(ReferenceRoll(data, {eq}, {1}),
                RunOp("Roll", {data, ScalarOf(DType::kInt32, s), ScalarOf(DType::kInt32, -1)})));
  }
}

TEST(RollSemantics, ExtremeShifts) {
  const TestTensor line = FromInt64(DType::kInt32, {5}, {1, 2, 3, 4, 5});
  // 2^63 - 1 = 2 (mod 5); -2^63 = 2 (mod 5).
  EXPECT_TRUE(
      Matches(ReferenceRoll(line, {2}, {0}),
              RunOp("Roll", {line, ScalarOf(DType::kInt64, kMax64), ScalarOf(DType::kInt64, 0)})));
  EXPECT_TRUE(
      Matches(ReferenceRoll(line, {2}, {0}),
              RunOp("Roll", {line, ScalarOf(DType::kInt64, kMin64), ScalarOf(DType::kInt64, 0)})));
  // INT32 extremes: 2^31 - 1 = 2 (mod 5), -2^31 = 2 (mod 5).
  EXPECT_TRUE(Matches(
      ReferenceRoll(line, {2}, {0}),
      RunOp("Roll", {line, ScalarOf(DType::kInt32, 2147483647), ScalarOf(DType::kInt32, 0)})));
  EXPECT_TRUE(Matches(
      ReferenceRoll(line, {2}, {0}),
      RunOp("Roll", {line, ScalarOf(DType::kInt32, -2147483648LL), ScalarOf(DType::kInt32, 0)})));
  // Sums that overflow int64 still mean the mathematical sum mod 5: 2+2 = 4.
  EXPECT_TRUE(Matches(
      ReferenceRoll(line, {4}, {0}),
      RunOp("Roll", {line, Vec(DType::kInt64, {kMax64, kMax64}), Vec(DType::kInt64, {0, 0})})));
  EXPECT_TRUE(Matches(
      ReferenceRoll(line, {4}, {0}),
      RunOp("Roll", {line, Vec(DType::kInt64, {kMin64, kMin64}), Vec(DType::kInt64, {0, -1})})));
  EXPECT_TRUE(
      Matches(ReferenceRoll(line, {4}, {0}),
              RunOp("Roll", {line, ScalarOf(DType::kInt64, kMax64), Vec(DType::kInt64, {0, 0})})));
  // max + min = -1.
  EXPECT_TRUE(Matches(
      ReferenceRoll(line, {4}, {0}),
      RunOp("Roll", {line, Vec(DType::kInt64, {kMax64, kMin64}), Vec(DType::kInt64, {0, 0})})));
  // Exact values for ReferenceRoll's arithmetic.
  EXPECT_EQ(ToInt64(ReferenceRoll(line, {kMax64, kMax64}, {0, 0}).view()),
            (std::vector<int64_t>{2, 3, 4, 5, 1}));
}

// semantics: "Rolling along a zero-size axis returns the empty tensor (no division by zero)."
TEST(RollSemantics, ZeroSizeDims) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    for (const Shape& shape : {Shape{0}, Shape{2, 0, 3}, Shape{0, 4}, Shape{3, 0}}) {
      SCOPED_TRACE(VecToString({shape.begin(), shape.end()}));
      const TestTensor data = Zeros(dt, shape);
      for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) {
        for (int64_t s : {0, 1, -3, 7}) {
          const absl::StatusOr<Tensor> got =
              RunOp("Roll", {data, ScalarOf(DType::kInt64, s), ScalarOf(DType::kInt64, a)});
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(got->shape(), shape);
          EXPECT_EQ(got->dtype(), dt);
          EXPECT_EQ(got->num_elements(), 0);
        }
      }
      std::vector<int64_t> all;
      for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) all.push_back(a);
      EXPECT_TRUE(Matches(
          data, RunOp("Roll", {data, ScalarOf(DType::kInt64, 5), Vec(DType::kInt64, all)})));
    }
  }
}

// semantics: "Empty axes with empty shift passes the data through, rank 0
// included; on rank-0 data every axis is out of range."
TEST(RollSemantics, EmptyAxesPassThrough) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(6));
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    const TestTensor scalar = RandomTensor(dt, {}, &rng);
    EXPECT_TRUE(
        Matches(scalar, RunOp("Roll", {scalar, Vec(DType::kInt64, {}), Vec(DType::kInt64, {})})));
    EXPECT_TRUE(
        Matches(scalar, RunOp("Roll", {scalar, Vec(DType::kInt32, {}), Vec(DType::kInt32, {})})));
    const TestTensor data = RandomTensor(dt, {3, 2}, &rng);
    EXPECT_TRUE(
        Matches(data, RunOp("Roll", {data, Vec(DType::kInt64, {}), Vec(DType::kInt64, {})})));
  }
}

// Reading taken where semantics.md is silent: a scalar or one-element shift
// "applies to every axis listed", so with no axes listed nothing moves.
TEST(RollSemantics, BroadcastShiftWithNoAxesPassesThrough) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(8));
  const TestTensor data = RandomTensor(DType::kInt32, {3, 2}, &rng);
  EXPECT_TRUE(
      Matches(data, RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), Vec(DType::kInt64, {})})));
  EXPECT_TRUE(
      Matches(data, RunOp("Roll", {data, Vec(DType::kInt32, {4}), Vec(DType::kInt64, {})})));
  const TestTensor scalar = RandomTensor(DType::kString, {}, &rng);
  EXPECT_TRUE(
      Matches(scalar, RunOp("Roll", {scalar, ScalarOf(DType::kInt64, 1), Vec(DType::kInt32, {})})));
}

TEST(RollSemantics, RankZeroWithAnyAxisRejected) {
  const TestTensor scalar = FromInt64(DType::kFloat32, {}, {3});
  EXPECT_INVALID(RunOp("Roll", {scalar, Vec(DType::kInt64, {1}), Vec(DType::kInt64, {0})}), "Roll",
                 "axes", "0");
  EXPECT_INVALID(RunOp("Roll", {scalar, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)}),
                 "Roll", "axes", "0");
  EXPECT_INVALID(RunOp("Roll", {scalar, ScalarOf(DType::kInt64, 0), ScalarOf(DType::kInt64, -1)}),
                 "Roll", "axes", "-1");
}

// "1: output tensor with shape and type equal to the data tensor."
TEST(RollSemantics, AllElementTypes) {
  for (DType dt : AllDTypes()) {
    SCOPED_TRACE(DTypeName(dt));
    std::mt19937_64 rng(::tensorops::testing::TestSeed(200 + static_cast<uint64_t>(dt)));
    const TestTensor data = RandomTensor(dt, {3, 4, 5}, &rng);
    struct Case {
      std::vector<int64_t> shift, axes;
    };
    for (const Case& c : std::vector<Case>{{{1}, {0}},
                                           {{-1, 2}, {0, 1}},
                                           {{7}, {2}},
                                           {{1, 2, 3}, {0, 1, 2}},
                                           {{2, -9, 4}, {-1, 1, -1}},
                                           {{3}, {0, 1, 2}}}) {
      SCOPED_TRACE(absl::StrCat("shift=", VecToString(c.shift), " axes=", VecToString(c.axes)));
      const absl::StatusOr<Tensor> got =
          RunOp("Roll", {data, Vec(DType::kInt64, c.shift), Vec(DType::kInt64, c.axes)});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->dtype(), dt);
      EXPECT_TRUE(Matches(ReferenceRoll(data, c.shift, c.axes), got));
    }
  }
}

TEST(RollSemantics, StringAndNaNBitsKept) {
  const TestTensor s = FromStrings({3}, {"", std::string("x\0y", 3), std::string(1000, 'q')});
  EXPECT_TRUE(Matches(FromStrings({3}, {std::string(1000, 'q'), "", std::string("x\0y", 3)}),
                      RunOp("Roll", {s, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)})));
  const TestTensor f = FromBits(DType::kFloat32, {3}, {0x7FC00001, 0x80000000, 0xFF800001});
  EXPECT_TRUE(Matches(FromBits(DType::kFloat32, {3}, {0x80000000, 0xFF800001, 0x7FC00001}),
                      RunOp("Roll", {f, ScalarOf(DType::kInt64, -1), ScalarOf(DType::kInt64, 0)})));
  const TestTensor h = FromBits(DType::kFloat16, {2}, {0x7C01, 0x8000});
  EXPECT_TRUE(Matches(FromBits(DType::kFloat16, {2}, {0x8000, 0x7C01}),
                      RunOp("Roll", {h, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)})));
  const TestTensor c = FromBits(DType::kComplex64, {2}, {0x800000007FC00001ull, 5});
  EXPECT_TRUE(Matches(FromBits(DType::kComplex64, {2}, {5, 0x800000007FC00001ull}),
                      RunOp("Roll", {c, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)})));
}

// The XML examples: data [3,10,100,200]; (1) shift and axes 1-D of 2; (2) shift
// of one element and 2 axes.
TEST(RollSpec, XmlExamples) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(7));
  const TestTensor data = RandomTensor(DType::kFloat32, {3, 10, 100, 200}, &rng);
  struct Case {
    std::vector<int64_t> shift, axes;
  };
  for (const Case& c :
       std::vector<Case>{{{3, -7}, {1, 3}}, {{1, 250}, {0, -1}}, {{5}, {0, 2}}, {{-1}, {2, 3}}}) {
    SCOPED_TRACE(absl::StrCat("shift=", VecToString(c.shift), " axes=", VecToString(c.axes)));
    const TestTensor shift = Vec(DType::kInt64, c.shift);
    const TestTensor axes = Vec(DType::kInt64, c.axes);
    const TensorView views[] = {data.view(), shift.view(), axes.view()};
    const absl::StatusOr<Tensor> got = ExecuteOp(Builtins(), "Roll", views, {});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->shape(), (Shape{3, 10, 100, 200}));
    EXPECT_TRUE(Matches(ReferenceRoll(data, c.shift, c.axes), got));
  }
}

TEST(RollSemantics, AliasRoll7) {
  const TestTensor data = ExampleData();
  EXPECT_TRUE(
      Matches(FromInt64(DType::kInt32, {4, 3}, {5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1}),
              RunOp("Roll-7", {data, Vec(DType::kInt64, {-1, 2}), Vec(DType::kInt64, {0, 1})})));
  EXPECT_INVALID(RunOp("Roll-7", {data, Vec(DType::kInt64, {1}), Vec(DType::kInt64, {2})}), "Roll",
                 "axes", "2");
}

// "Attributes: No attributes available." semantics: unknown attributes rejected.
TEST(RollSemantics, AnyAttributeRejected) {
  const TestTensor data = ExampleData();
  for (const std::string name : {"axis", "mode", "shift", "batch_axis", ""}) {
    SCOPED_TRACE(name);
    EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)},
                         {{name, Int(0)}}),
                   "Roll", name);
  }
}

TEST(RollSemantics, WrongNumberOfInputsRejected) {
  const TestTensor data = ExampleData();
  EXPECT_INVALID(RunOp("Roll", {}), "Roll");
  EXPECT_INVALID(RunOp("Roll", {data}), "Roll");
  EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1)}), "Roll");
  EXPECT_INVALID(RunOp("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0),
                                ScalarOf(DType::kInt64, 0)}),
                 "Roll");
}

}  // namespace
}  // namespace test
}  // namespace tensorops
