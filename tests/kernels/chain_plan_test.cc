// Chains (OpRegistry::PrepareChain, kernels/chain_plan.h): every chain must
// give the bytes of running its ops one by one, fused into one pass or not,
// on one thread or split across a pool, with or without streaming stores.
#include "kernels/chain_plan.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/op_registry.h"
#include "kernels/streaming_store.h"
#include "kernels/thread_pool.h"
#include "tests/kernels/test_util.h"
#include "tests/seed.h"

namespace tensorops {
namespace test {
namespace {

// One step as a test builds it: op, its inputs after the first, attributes.
struct TestStep {
  std::string op;
  std::vector<TestTensor> inputs;
  Attrs attrs;
};

std::vector<ChainStep> ToChainSteps(const std::vector<TestStep>& steps) {
  std::vector<ChainStep> out;
  for (const TestStep& s : steps) {
    ChainStep c;
    c.op = s.op;
    for (const TestTensor& t : s.inputs) c.inputs.push_back(t.view());
    c.attrs = s.attrs;
    out.push_back(std::move(c));
  }
  return out;
}

// The chain run op by op: the oracle.
absl::StatusOr<TestTensor> OneByOne(const TestTensor& data, const std::vector<TestStep>& all) {
  TestTensor current = data;
  for (const TestStep& s : all) {
    std::vector<TestTensor> inputs = {current};
    inputs.insert(inputs.end(), s.inputs.begin(), s.inputs.end());
    absl::StatusOr<Tensor> out = RunOp(s.op, inputs, s.attrs);
    if (!out.ok()) return out.status();
    TestTensor next;
    next.dtype = out->dtype();
    next.shape = out->shape();
    next.bytes.assign(static_cast<const unsigned char*>(out->data()),
                      static_cast<const unsigned char*>(out->data()) + out->num_bytes());
    next.bytes.push_back(0);
    next.strings = current.strings;  // STRING elements still point at the input's storage
    current = std::move(next);
  }
  return current;
}

absl::StatusOr<PreparedOp> Chain(const TestTensor& data, const std::vector<TestStep>& all) {
  std::vector<TensorView> first = {data.view()};
  for (const TestTensor& t : all[0].inputs) first.push_back(t.view());
  std::vector<TestStep> rest(all.begin() + 1, all.end());
  return Builtins().PrepareChain(all[0].op, first, all[0].attrs, ToChainSteps(rest));
}

TestStep RandomStep(const Shape& shape, std::mt19937_64* rng) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto pick = [rng](int64_t n) { return static_cast<int64_t>((*rng)() % n); };
  auto axis = [&](bool allow_negative) {
    int64_t a = pick(rank);
    return allow_negative && pick(2) == 0 ? a - rank : a;
  };
  const int64_t kind = rank >= 2 ? pick(5) : pick(3);
  TestStep s;
  switch (kind) {
    case 0: {  // Reverse, index mode
      s.op = pick(2) == 0 ? "Reverse" : "Reverse-1";
      s.attrs["mode"] = Str("index");
      std::vector<int64_t> axes;
      for (int64_t n = pick(rank + 1); n > 0; --n) axes.push_back(axis(true));
      const DType t = pick(2) == 0 ? DType::kInt64 : DType::kInt8;
      s.inputs.push_back(Vec(t, axes));
      break;
    }
    case 1: {  // Reverse, mask mode
      s.op = "Reverse";
      s.attrs["mode"] = Str("mask");
      std::vector<int64_t> mask;
      for (int64_t a = 0; a < rank; ++a) mask.push_back(pick(2));
      s.inputs.push_back(Vec(DType::kBool, mask));
      break;
    }
    case 2: {  // Roll: one shift for every axis, or one per axis; repeats allowed
      s.op = pick(2) == 0 ? "Roll" : "Roll-7";
      std::vector<int64_t> axes, shifts;
      for (int64_t n = 1 + pick(rank); n > 0; --n) {
        axes.push_back(axis(true));
        shifts.push_back(pick(41) - 20);
      }
      if (pick(3) == 0) shifts.resize(1);
      s.inputs.push_back(Vec(pick(2) == 0 ? DType::kInt64 : DType::kInt32, shifts));
      s.inputs.push_back(Vec(DType::kInt64, axes));
      break;
    }
    case 3: {  // ReverseSequence-1
      s.op = pick(2) == 0 ? "ReverseSequence" : "ReverseSequence-1";
      const int64_t b = pick(rank);
      int64_t q = pick(rank - 1);
      if (q >= b) ++q;
      s.attrs["batch_axis"] = Int(pick(2) == 0 ? b : b - rank);
      s.attrs["seq_axis"] = Int(q);
      std::vector<int64_t> lengths;
      for (int64_t i = 0; i < shape[b]; ++i) lengths.push_back(pick(shape[q] + 1));
      s.inputs.push_back(Vec(DType::kInt32, lengths));
      break;
    }
    default: {  // onnx.ReverseSequence: axes 0 and 1
      s.op = "onnx.ReverseSequence";
      const int64_t b = pick(2);
      if (b == 0) {  // else the defaults: batch_axis 1, time_axis 0
        s.attrs["batch_axis"] = Int(0);
        s.attrs["time_axis"] = Int(1);
      }
      std::vector<int64_t> lengths;
      for (int64_t i = 0; i < shape[b]; ++i) lengths.push_back(pick(shape[1 - b] + 1));
      s.inputs.push_back(Vec(DType::kInt64, lengths));
      break;
    }
  }
  return s;
}

enum class RunMode { kInline, kPool, kShuffled };

TEST(ChainPlanTest, RandomChainsMatchOpByOne) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(20261126));
  ThreadPool pool(3);
  const DType types[] = {DType::kUInt8,   DType::kInt16,      DType::kFloat32,
                         DType::kFloat64, DType::kComplex128, DType::kString};
  int fused = 0, passes = 0, single = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int64_t rank = 1 + static_cast<int64_t>(rng() % 5);
    Shape shape;
    for (int64_t a = 0; a < rank; ++a) {
      // Mostly small dims; some long ones so rows pass kFusedMinRowBytes.
      const uint64_t r = rng() % 10;
      shape.push_back(r < 6 ? 1 + rng() % 4 : r < 9 ? 5 + rng() % 12 : 40 + rng() % 60);
    }
    if (iter % 97 == 0) shape[rng() % rank] = 0;
    const DType dtype = types[rng() % (sizeof(types) / sizeof(types[0]))];
    if (NumElements(shape) * ElementWidth(dtype) > (1 << 20)) continue;
    const TestTensor data = RandomTensor(dtype, shape, &rng);
    std::vector<TestStep> steps;
    for (int64_t n = 1 + static_cast<int64_t>(rng() % 8); n > 0; --n) {
      steps.push_back(RandomStep(shape, &rng));
    }
    SCOPED_TRACE(absl::StrCat("iteration ", iter, ": ", Describe(data.view()), ", ", steps.size(),
                              " steps"));
    absl::StatusOr<TestTensor> expected = OneByOne(data, steps);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const bool stream = rng() % 4 == 0;
    SetStreamingStoreMinBytes(stream ? 0 : -1);
    absl::StatusOr<PreparedOp> op = Chain(data, steps);
    ASSERT_TRUE(op.ok()) << op.status();
    if (steps.size() == 1) {
      ++single;
    } else if (op->then.empty()) {
      ++fused;
    } else {
      ++passes;
    }
    const auto mode = static_cast<RunMode>(rng() % 3);
    std::vector<unsigned char> out(op->output_bytes() + 1, 0xAB);
    if (mode == RunMode::kInline) {
      op->Run(out.data());
    } else if (mode == RunMode::kPool || !op->then.empty()) {
      RunPrepared(*op, out.data(), &pool, /*min_parallel_bytes=*/0);
    } else {
      // Disjoint parts in random order: each must write only its own bytes.
      std::vector<std::pair<int64_t, int64_t>> parts;
      for (int64_t b = 0; b < op->units;) {
        const int64_t e = std::min(op->units, b + 1 + static_cast<int64_t>(rng() % 3));
        parts.push_back({b, e});
        b = e;
      }
      std::shuffle(parts.begin(), parts.end(), rng);
      for (const auto& [b, e] : parts) op->run_range(out.data(), b, e);
    }
    SetStreamingStoreMinBytes(-1);
    TensorView got{dtype, shape, out.data()};
    ASSERT_TRUE(BitwiseEqual(expected->view(), got));
    EXPECT_EQ(out.back(), 0xAB) << "wrote past the output";
  }
  // Both plans for chains with a ReverseSequence, and single ops, were covered.
  EXPECT_GT(fused, 100);
  EXPECT_GT(passes, 50);
  EXPECT_GT(single, 50);
}

Movement Axes(std::vector<DimTransform> t);
Movement Seq(int64_t batch, int64_t seq, std::vector<int64_t> lengths);

// The chain's movements as PrepareChain sees them: the first op's, then the steps'.
std::vector<Movement> Movements(const TestTensor& data, const std::vector<TestStep>& all) {
  std::vector<TensorView> first = {data.view()};
  for (const TestTensor& t : all[0].inputs) first.push_back(t.view());
  const OpDef* def = Builtins().Find(all[0].op);
  EXPECT_NE(def, nullptr);
  absl::StatusOr<Movement> m = def->movement(first, all[0].attrs);
  EXPECT_TRUE(m.ok()) << m.status();
  std::vector<Movement> out = {*std::move(m)};
  std::vector<TestStep> rest(all.begin() + 1, all.end());
  absl::StatusOr<std::vector<Movement>> more =
      Builtins().CheckChain(TensorType{data.dtype, data.shape}, ToChainSteps(rest));
  EXPECT_TRUE(more.ok()) << more.status();
  for (Movement& mv : *more) out.push_back(std::move(mv));
  return out;
}

TEST(ChainPlanTest, FlowPlanPlacesEveryInputPieceOnce) {
  // A flowing stream (ExecuteStream with flow) moves its input as it arrives:
  // runs of input blocks of random lengths, in order, each placed where the
  // flow plan says; the output must be the chain's, every byte written once.
  std::mt19937_64 rng(::tensorops::testing::TestSeed(20261127));
  const DType types[] = {DType::kUInt8, DType::kInt16, DType::kFloat32, DType::kFloat64,
                         DType::kComplex128};
  int planned = 0, declined = 0, with_sequence = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int64_t rank = static_cast<int64_t>(rng() % 6);
    Shape shape;
    for (int64_t a = 0; a < rank; ++a) {
      const uint64_t r = rng() % 10;
      shape.push_back(r < 6 ? 1 + rng() % 4 : r < 9 ? 5 + rng() % 12 : 40 + rng() % 60);
    }
    const DType dtype = types[rng() % (sizeof(types) / sizeof(types[0]))];
    if (NumElements(shape) * ElementWidth(dtype) > (1 << 20)) continue;
    const TestTensor data = RandomTensor(dtype, shape, &rng);
    std::vector<TestStep> steps;
    for (int64_t n = 1 + static_cast<int64_t>(rng() % 6); rank > 0 && n > 0; --n) {
      steps.push_back(RandomStep(shape, &rng));
    }
    if (rank == 0) steps = {{"Reverse", {Vec(DType::kInt64, {})}, {{"mode", Str("index")}}}};
    SCOPED_TRACE(absl::StrCat("iteration ", iter, ": ", Describe(data.view()), ", ", steps.size(),
                              " steps"));
    absl::StatusOr<TestTensor> expected = OneByOne(data, steps);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const std::vector<Movement> movements = Movements(data, steps);
    const int64_t max_block = int64_t{1} << (rng() % 12);
    const int64_t min_row = rng() % 2 == 0 ? 0 : 64;
    std::unique_ptr<FlowPlan> plan = FlowPlan::Make(dtype, shape, movements, max_block, min_row);
    if (plan == nullptr) {
      ++declined;
      continue;
    }
    ++planned;
    for (const Movement& m : movements) with_sequence += m.sequence.has_value() ? 1 : 0;
    const int64_t bytes = NumElements(shape) * ElementWidth(dtype);
    ASSERT_EQ(bytes % plan->block_bytes(), 0);
    const int64_t blocks = bytes / plan->block_bytes();
    std::vector<unsigned char> out(bytes + 1, 0xAB);
    std::vector<int> written(bytes, 0);
    std::vector<FlowPlan::Piece> pieces;
    const auto* in = data.bytes.data();
    for (int64_t b = 0; b < blocks;) {
      const int64_t row_end = (b / plan->row_blocks() + 1) * plan->row_blocks();
      const int64_t n = std::min(row_end - b, 1 + static_cast<int64_t>(rng() % 7));
      pieces.clear();
      plan->Map(b, n, &pieces);
      int64_t covered = 0;
      for (const FlowPlan::Piece& p : pieces) {
        const int64_t k = plan->block_bytes();
        ASSERT_GE(p.in_block, b);
        ASSERT_LE(p.in_block + p.count, b + n);
        ASSERT_LE((p.out_block + p.count) * k, bytes);
        plan->Move(p, reinterpret_cast<const char*>(in) + p.in_block * k,
                   reinterpret_cast<char*>(out.data()) + p.out_block * k);
        for (int64_t i = p.out_block * k; i < (p.out_block + p.count) * k; ++i) ++written[i];
        covered += p.count;
      }
      ASSERT_EQ(covered, n);
      b += n;
    }
    for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(written[i], 1) << "output byte " << i;
    TensorView got{dtype, shape, out.data()};
    ASSERT_TRUE(BitwiseEqual(expected->view(), got));
    EXPECT_EQ(out.back(), 0xAB) << "wrote past the output";
  }
  EXPECT_GT(planned, 500);
  EXPECT_GT(with_sequence, 200);
  EXPECT_GT(declined, 10);  // time-major over tiny rows, batch axis last
}

TEST(ChainPlanTest, FlowPlanDeclinesOnlyTinyRows) {
  const DimTransform c = DimTransform::Copy(), r = DimTransform::Reverse();
  // Reverses and Rolls: always, whatever the block size.
  std::vector<Movement> axes = {Axes({r, DimTransform::Roll(3), c})};
  EXPECT_NE(FlowPlan::Make(DType::kUInt8, {64, 64, 64}, axes, 1 << 20, 4096), nullptr);
  EXPECT_NE(FlowPlan::Make(DType::kUInt8, {64, 64, 64}, axes, 1, 4096), nullptr);
  // Batch-major ReverseSequence over long rows: runs along the sequence axis.
  std::vector<Movement> batch_major = {Seq(0, 1, std::vector<int64_t>(64, 7))};
  EXPECT_NE(FlowPlan::Make(DType::kUInt8, {64, 4096}, batch_major, 1 << 20, 4096), nullptr);
  // Time-major over rows of 64 bytes, or the batch axis last: too short.
  std::vector<Movement> time_major = {Seq(1, 0, std::vector<int64_t>(64, 7))};
  EXPECT_EQ(FlowPlan::Make(DType::kUInt8, {1000, 64}, time_major, 1 << 20, 4096), nullptr);
  EXPECT_NE(FlowPlan::Make(DType::kUInt8, {1000, 64, 4096}, time_major, 1 << 20, 4096), nullptr);
}

TEST(ChainPlanTest, ApiExample) {
  // ../shared/api.md: Reverse rows, then Roll by 1 along axis 1.
  const TestTensor data = FromInt64(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<TestStep> steps = {{"Reverse", {Vec(DType::kInt64, {0})}, {{"mode", Str("index")}}},
                                 {"Roll", {Vec(DType::kInt64, {1}), Vec(DType::kInt64, {1})}, {}}};
  absl::StatusOr<PreparedOp> op = Chain(data, steps);
  ASSERT_TRUE(op.ok()) << op.status();
  Tensor out(op->dtype, op->shape);
  op->Run(out.mutable_data());
  EXPECT_EQ(ToInt64(out.view()), (std::vector<int64_t>{6, 4, 5, 3, 1, 2}));
}

TEST(ChainPlanTest, ReverseAndRollComposeToOnePass) {
  // Reverse then Roll along one axis reads (c - j) mod n: the kReverseRoll map.
  const TestTensor data = FromInt64(DType::kInt32, {5}, {0, 1, 2, 3, 4});
  std::vector<TestStep> steps = {{"Reverse", {Vec(DType::kInt64, {0})}, {{"mode", Str("index")}}},
                                 {"Roll", {Vec(DType::kInt64, {2}), Vec(DType::kInt64, {0})}, {}}};
  absl::StatusOr<PreparedOp> op = Chain(data, steps);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE(op->then.empty());
  Tensor out(op->dtype, op->shape);
  op->Run(out.mutable_data());
  EXPECT_EQ(ToInt64(out.view()), (std::vector<int64_t>{1, 0, 4, 3, 2}));
}

Movement Axes(std::vector<DimTransform> t) {
  Movement m;
  m.axes = std::move(t);
  return m;
}
Movement Seq(int64_t batch, int64_t seq, std::vector<int64_t> lengths) {
  Movement m;
  m.sequence = Movement::Sequence{batch, seq, std::move(lengths)};
  return m;
}

TEST(ChainPlanTest, PlannedPasses) {
  const DimTransform c = DimTransform::Copy(), r = DimTransform::Reverse();
  // Reverses and Rolls only: one pass, whatever the length.
  std::vector<Movement> eight(8, Axes({r, DimTransform::Roll(3), c}));
  EXPECT_EQ(PlannedPasses(DType::kUInt8, {64, 64, 64}, eight), 1);
  // Batch-major ReverseSequence among them: rows of [seq, inner] are long, fused.
  std::vector<Movement> mixed = {Axes({r, c, c}), Seq(0, 1, std::vector<int64_t>(64, 7)),
                                 Axes({c, DimTransform::Roll(5), r})};
  EXPECT_EQ(PlannedPasses(DType::kUInt8, {64, 64, 64}, mixed), 1);
  // Time-major over one-byte elements: rows of one element; passes, the two
  // axis steps around the sequence each one.
  std::vector<Movement> tiny = {Axes({r, c}), Seq(1, 0, std::vector<int64_t>(64, 7)),
                                Axes({DimTransform::Roll(1), c}), Axes({c, r})};
  EXPECT_EQ(PlannedPasses(DType::kUInt8, {1000, 64}, tiny), 3);
}

TEST(ChainPlanTest, StepErrorsNameTheStep) {
  const TestTensor data = FromInt64(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const TestStep reverse{"Reverse", {Vec(DType::kInt64, {0})}, {{"mode", Str("index")}}};
  const TestStep roll{"Roll", {Vec(DType::kInt64, {1}), Vec(DType::kInt64, {1})}, {}};
  // A bad axis in step 2 (the third op).
  EXPECT_INVALID(
      Chain(data,
            {reverse, roll, {"Roll", {Vec(DType::kInt64, {1}), Vec(DType::kInt64, {5})}, {}}}),
      "then[1] (Roll): axes[0] = 5");
  // The op's own "Roll: " prefix is not repeated after the step's.
  absl::StatusOr<PreparedOp> bad = Chain(data, {reverse, {"Roll", {Vec(DType::kInt64, {1})}, {}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("Roll: Roll"), absl::string_view::npos)
      << bad.status().message();
  EXPECT_INVALID(bad, "then[0] (Roll): expects 3 inputs");
  // Attributes, and aliases named by their canonical op.
  EXPECT_INVALID(Chain(data, {roll, {"Reverse-1", {Vec(DType::kInt64, {0})}, {}}}),
                 "then[0] (Reverse): attribute 'mode'");
  EXPECT_INVALID(
      Chain(data, {roll, {"ReverseSequence", {Vec(DType::kInt64, {1, 2})}, {{"unknown", Int(1)}}}}),
      "then[0] (ReverseSequence): unknown attribute");
  EXPECT_INVALID(Chain(data, {roll, {"ReverseSequence", {Vec(DType::kInt64, {1, 9})}, {}}}),
                 "then[0] (ReverseSequence): seq_lengths[1] = 9");
  // An unknown op: UNIMPLEMENTED, naming the step.
  EXPECT_STATUS_CODE(Chain(data, {roll, roll, {"Transpose", {}, {}}}),
                     absl::StatusCode::kUnimplemented, "then[1]: unknown op", "Transpose");
  // The first op's errors are the single call's, without a prefix.
  absl::StatusOr<PreparedOp> first =
      Chain(data, {{"Roll", {Vec(DType::kInt64, {1}), Vec(DType::kInt64, {7})}, {}}, roll});
  ASSERT_FALSE(first.ok());
  EXPECT_TRUE(absl::StartsWith(first.status().message(), "Roll: axes[0]"))
      << first.status().message();
}

TEST(ChainPlanTest, SixtyFourStepsAndNoMore) {
  const TestTensor data = FromInt64(DType::kInt32, {4}, {1, 2, 3, 4});
  const TestStep roll{"Roll", {Vec(DType::kInt64, {1}), Vec(DType::kInt64, {0})}, {}};
  std::vector<TestStep> steps(1 + kMaxChainSteps, roll);
  absl::StatusOr<PreparedOp> op = Chain(data, steps);
  ASSERT_TRUE(op.ok()) << op.status();
  Tensor out(op->dtype, op->shape);
  op->Run(out.mutable_data());
  // 65 rolls by 1 of 4 elements: a roll by 1.
  EXPECT_EQ(ToInt64(out.view()), (std::vector<int64_t>{4, 1, 2, 3}));
  steps.push_back(roll);
  EXPECT_INVALID(Chain(data, steps), "then has 65 steps", "at most 64");
}

}  // namespace
}  // namespace test
}  // namespace tensorops
