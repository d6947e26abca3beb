// The axis analysis both chain plans share (kernels/chain_axes.h): each
// AxisMap against the transform it stands for, composed and inverted; which
// axes a ReverseSequence couples and where a row may run; and the trailing
// block's plan against a plain per-axis reference.
#include "kernels/chain_axes.h"

#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tensorops {
namespace {

using Kind = DimTransform::Kind;

// The input index output index j reads along an axis of size n (the
// definitions in kernels/strided_copy.h, written out plainly).
int64_t ReadIndex(const DimTransform& t, int64_t j, int64_t n) {
  switch (t.kind) {
    case Kind::kCopy:
      return j;
    case Kind::kReverse:
      return n - 1 - j;
    case Kind::kRoll:
      return ((j - t.shift) % n + n) % n;
    case Kind::kReverseRoll:
      return ((t.shift - j) % n + n) % n;
  }
  return -1;
}

// Every transform of an axis of size n.
std::vector<DimTransform> AllTransforms(int64_t n) {
  std::vector<DimTransform> out = {DimTransform::Copy(), DimTransform::Reverse()};
  for (int64_t s = 0; s < n; ++s) {
    out.push_back(DimTransform::Roll(s));
    out.push_back(DimTransform::ReverseRoll(s));
  }
  return out;
}

std::string Name(const DimTransform& t) {
  return absl::StrCat(static_cast<int>(t.kind), "/", t.shift);
}

TEST(AxisMapTest, ReadsAsItsTransformAndBack) {
  for (int64_t n : {1, 2, 3, 7}) {
    for (const DimTransform& t : AllTransforms(n)) {
      SCOPED_TRACE(absl::StrCat("n=", n, " t=", Name(t)));
      const AxisMap m = AxisMap::From(t, n);
      const DimTransform back = m.ToTransform(n);
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(m.Apply(j, n), ReadIndex(t, j, n));
        EXPECT_EQ(ReadIndex(back, j, n), ReadIndex(t, j, n));
      }
      // A map said to be the identity reads as one (the plans skip it); the
      // converse may fail where n = 2 (a reversed roll by 0 is the
      // identity there, and stays a move: correct, only not skipped).
      bool identity = true;
      for (int64_t j = 0; j < n; ++j) identity = identity && ReadIndex(t, j, n) == j;
      if (m.identity() || back.kind == Kind::kCopy) EXPECT_TRUE(identity);
      if (n != 2) EXPECT_EQ(m.identity(), identity);
    }
  }
}

TEST(AxisMapTest, ComposesAndInverts) {
  for (int64_t n : {1, 2, 5, 6}) {
    for (const DimTransform& first : AllTransforms(n)) {
      for (const DimTransform& second : AllTransforms(n)) {
        SCOPED_TRACE(absl::StrCat("n=", n, " first=", Name(first), " second=", Name(second)));
        // `second` runs on `first`'s output: output j reads first(second(j)).
        const AxisMap m = AxisMap::Compose(AxisMap::From(first, n), AxisMap::From(second, n), n);
        const AxisMap inv = m.Inverse(n);
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_EQ(m.Apply(j, n), ReadIndex(first, ReadIndex(second, j, n), n));
          EXPECT_EQ(inv.Apply(m.Apply(j, n), n), j);
        }
      }
    }
  }
}

Movement Axes(std::vector<DimTransform> axes) {
  Movement m;
  m.axes = std::move(axes);
  return m;
}

Movement Sequence(int64_t batch, int64_t seq, std::vector<int64_t> lengths) {
  Movement m;
  m.sequence = Movement::Sequence{batch, seq, std::move(lengths)};
  return m;
}

TEST(ChainAxesTest, CouplingAndTheFirstRunAxis) {
  const DimTransform c = DimTransform::Copy();
  struct Row {
    const char* name;
    Shape shape;
    std::vector<Movement> steps;
    std::vector<bool> coupled, batch;
    int64_t last, first_run;
  };
  const std::vector<Row> rows = {
      {"no sequence", {4, 8}, {Axes({DimTransform::Reverse(), c})}, {0, 0}, {0, 0}, -1, 0},
      {"batch-major", {4, 8, 16}, {Sequence(0, 1, {1, 2, 3, 4})}, {1, 1, 0}, {1, 0, 0}, 1, 1},
      {"time-major", {8, 4, 16}, {Sequence(1, 0, {1, 2, 3, 4})}, {1, 1, 0}, {0, 1, 0}, 1, 2},
      {"batch last", {8, 4}, {Sequence(1, 0, {1, 2, 3, 4})}, {1, 1}, {0, 1}, 1, 2},
      {"two sequences",
       {2, 3, 4, 5},
       {Sequence(0, 1, {1, 2}), Axes({c, c, DimTransform::Roll(1), c}), Sequence(0, 2, {3, 4})},
       {1, 1, 1, 0},
       {1, 0, 0, 0},
       2,
       2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const ChainAxes axes(row.shape, row.steps);
    ASSERT_EQ(axes.rank(), static_cast<int64_t>(row.shape.size()));
    for (int64_t a = 0; a < axes.rank(); ++a) {
      SCOPED_TRACE(absl::StrCat("axis ", a));
      EXPECT_EQ(axes.coupled(a), row.coupled[a]);
      EXPECT_EQ(axes.batch(a), row.batch[a]);
    }
    EXPECT_EQ(axes.last_coupled(), row.last);
    EXPECT_EQ(axes.first_run_axis(), row.first_run);
  }
}

TEST(ChainAxesTest, FreeMapsComposeEveryReverseAndRollAcrossSequences) {
  const DimTransform c = DimTransform::Copy();
  const Shape shape = {4, 8, 16};
  const std::vector<Movement> steps = {Axes({c, c, DimTransform::Roll(1)}),
                                       Sequence(0, 1, {1, 2, 3, 4}),
                                       Axes({DimTransform::Roll(3), c, DimTransform::Reverse()}),
                                       Axes({DimTransform::Roll(2), c, DimTransform::Roll(5)})};
  const ChainAxes axes(shape, steps);
  // Axis 0: Roll 3 then Roll 2 = Roll 5 = Roll 1 of 4. Axis 1: only the
  // ReverseSequence touches it. Axis 2: Roll 1, Reverse, Roll 5.
  for (int64_t a = 0; a < 3; ++a) {
    SCOPED_TRACE(absl::StrCat("axis ", a));
    const int64_t n = shape[a];
    for (int64_t j = 0; j < n; ++j) {
      int64_t x = j;
      for (size_t k = steps.size(); k-- > 0;) {
        if (!steps[k].sequence) x = ReadIndex(steps[k].axes[a], x, n);
      }
      EXPECT_EQ(axes.free_map(a).Apply(j, n), x);
    }
  }
  EXPECT_TRUE(axes.free_map(1).identity());
}

TEST(ChainAxesTest, TrailingPlanMovesTheBlockByTheComposedMaps) {
  const DimTransform c = DimTransform::Copy();
  const Shape shape = {3, 4, 5, 6};
  struct Row {
    const char* name;
    std::vector<Movement> steps;
    int64_t split;
    bool copies;  // the trailing axes only copy: no plan
  };
  const std::vector<Row> rows = {
      {"copy", {Axes({c, c, c, c})}, 1, true},
      {"moves before the split only",
       {Axes({DimTransform::Reverse(), DimTransform::Roll(1), c, c})},
       1,
       true},
      {"undone",
       {Axes({c, c, DimTransform::Roll(2), c}), Axes({c, c, DimTransform::Roll(3), c})},
       1,
       true},
      {"roll and reverse",
       {Axes({c, c, DimTransform::Roll(2), c}), Axes({c, c, c, DimTransform::Reverse()})},
       1,
       false},
      {"last axis", {Axes({c, DimTransform::Roll(1), c, DimTransform::ReverseRoll(2)})}, 2, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const ChainAxes axes(shape, row.steps);
    std::unique_ptr<AxisTransformPlan> plan = axes.TrailingPlan(row.split, 4, false);
    ASSERT_EQ(plan == nullptr, row.copies);
    if (plan == nullptr) continue;
    const Shape trailing(shape.begin() + row.split + 1, shape.end());
    const int64_t count = NumElements(trailing);
    std::vector<int32_t> in(count), out(count, -1);
    std::iota(in.begin(), in.end(), 0);
    plan->Run(in.data(), out.data());
    // Output element (i_0, i_1, ...) of the block reads input element
    // (free_map(a).Apply(i_a)) per trailing axis.
    for (int64_t e = 0; e < count; ++e) {
      int64_t rest = e, src = 0, stride = 1;
      for (int64_t k = static_cast<int64_t>(trailing.size()); k-- > 0;) {
        const int64_t a = row.split + 1 + k;
        src += axes.free_map(a).Apply(rest % shape[a], shape[a]) * stride;
        rest /= shape[a];
        stride *= shape[a];
      }
      ASSERT_EQ(out[e], in[src]) << "element " << e;
    }
  }
}

}  // namespace
}  // namespace tensorops
