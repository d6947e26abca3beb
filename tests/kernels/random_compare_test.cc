// Seeded, reproducible randomized comparison of the kernels against the
// reference implementations (reference_ops.h). Only valid inputs are generated
// here, so every case must match bit for bit.
//
// Reproduce a failure: the trace prints the base seed and the case number; run
//   TENSOROPS_RANDOM_SEED=<seed> ./kernels_random_compare_test --gtest_filter=...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/op_registry.h"
#include "kernels/streaming_store.h"
#include "kernels/thread_pool.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_util.h"
#include "tests/seed.h"

namespace tensorops {
namespace test {
namespace {

constexpr int kCasesPerOp = 5000;
constexpr uint64_t kDefaultSeed = 20240607;
constexpr int64_t kMaxElements = 4096;
constexpr int kMaxReportedFailures = 10;
constexpr int64_t kGuardBytes = 64;
constexpr unsigned char kSentinel = 0xCD;

// TENSOROPS_RANDOM_SEED as given, else TENSOROPS_TEST_SEED's (tests/seed.h).
uint64_t BaseSeed() {
  const char* env = std::getenv("TENSOROPS_RANDOM_SEED");
  if (env != nullptr && *env != '\0') return std::strtoull(env, nullptr, 0);
  return ::tensorops::testing::TestSeed(kDefaultSeed);
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

const std::vector<DType> kIntegerTypes = {DType::kInt8,   DType::kInt16, DType::kInt32,
                                          DType::kInt64,  DType::kUInt8, DType::kUInt16,
                                          DType::kUInt32, DType::kUInt64};
const std::vector<DType> kFloatTypes = {DType::kFloat32,  DType::kFloat64,    DType::kFloat16,
                                        DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2};

// Random choices for one case; deterministic in its seed.
class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  std::mt19937_64* rng() { return &rng_; }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    if (span == 0) return static_cast<int64_t>(rng_());
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + rng_() % span);
  }
  bool Percent(int p) { return Uniform(0, 99) < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }
  DType AnyDType() {
    const auto all = AllDTypes();
    return all[static_cast<size_t>(Uniform(0, static_cast<int64_t>(all.size()) - 1))];
  }

  // Rank in [min_rank, max_rank]; dims mostly 0-5, sometimes larger; at most
  // kMaxElements elements.
  Shape RandomShape(int64_t min_rank, int64_t max_rank) {
    for (;;) {
      const int64_t rank = Uniform(min_rank, max_rank);
      Shape shape;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t p = Uniform(0, 99);
        if (p < 3) {
          shape.push_back(0);
        } else if (p < 85) {
          shape.push_back(Uniform(1, 5));
        } else if (p < 96) {
          shape.push_back(Uniform(6, 17));
        } else {
          shape.push_back(Uniform(18, 300));
        }
      }
      if (NumElements(shape) <= kMaxElements) return shape;
    }
  }

  // Value in [0, max] representable in `type` (0 always is).
  int64_t LengthFor(DType type, int64_t max) {
    int64_t v = Uniform(0, max);
    while (v > 0 && !ExactlyRepresentable(type, static_cast<double>(v))) --v;
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

// One generated call and its expected output.
struct Case {
  std::string op;
  std::vector<TestTensor> inputs;
  Attrs attrs;
  TestTensor expected;
  std::string description;
};

std::string AttrsToString(const Attrs& attrs) {
  std::string s = "{";
  for (const auto& [name, v] : attrs) {
    absl::StrAppend(&s, name, ":",
                    v.kind == AttrValue::Kind::kString ? v.str : absl::StrCat(v.number), " ");
  }
  return s + "}";
}

std::string DescribeCase(const Case& c) {
  std::string s = absl::StrCat(c.op, " attrs=", AttrsToString(c.attrs), " inputs:");
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TestTensor& t = c.inputs[i];
    absl::StrAppend(&s, " ", Describe(t.view()));
    if (i > 0) absl::StrAppend(&s, "=", VecToString(ToInt64(t.view())));
  }
  return s;
}

// Axis in [0, rank), written negatively half the time when `type` is signed.
int64_t RandomAxis(Gen* g, int64_t rank, bool allow_negative) {
  const int64_t a = g->Uniform(0, rank - 1);
  return allow_negative && g->Percent(50) ? a - rank : a;
}

bool IsSigned(DType t) { return GetDTypeInfo(t).cls == DTypeClass::kSignedInt; }

Case MakeReverseCase(Gen* g) {
  Case c;
  c.op = g->Percent(10) ? "Reverse-1" : "Reverse";
  const DType dt = g->AnyDType();
  const Shape shape = g->RandomShape(0, 6);
  const int64_t rank = static_cast<int64_t>(shape.size());
  TestTensor data = RandomTensor(dt, shape, g->rng());
  if (g->Percent(50)) {
    c.attrs = {{"mode", Str("index")}};
    const DType it = g->Pick(kIntegerTypes);
    std::vector<int64_t> axes;
    // Duplicates allowed, and more entries than axes (OpenVINO accepts them).
    const int64_t n = rank == 0 ? 0 : g->Uniform(0, 2 * rank + 1);
    for (int64_t i = 0; i < n; ++i) axes.push_back(RandomAxis(g, rank, IsSigned(it)));
    c.expected = ReferenceReverse(data, axes);
    c.inputs = {std::move(data), Vec(it, axes)};
  } else {
    c.attrs = {{"mode", Str("mask")}};
    std::vector<int64_t> bits;
    std::vector<bool> mask;
    for (int64_t d = 0; d < rank; ++d) {
      bits.push_back(g->Uniform(0, 1));
      mask.push_back(bits.back() != 0);
    }
    c.expected = ReferenceReverseMask(data, mask);
    c.inputs = {std::move(data), Vec(DType::kBool, bits)};
  }
  return c;
}

Case MakeReverseSequenceCase(Gen* g) {
  Case c;
  c.op = g->Percent(10) ? "ReverseSequence-1" : "ReverseSequence";
  const DType dt = g->AnyDType();
  const Shape shape = g->RandomShape(2, 6);
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t batch = 0, seq = 1;
  if (g->Percent(25)) {
    // Defaults, spelled out or not.
    if (g->Percent(50)) c.attrs["batch_axis"] = Int(g->Percent(50) ? 0 : -rank);
    if (g->Percent(50)) c.attrs["seq_axis"] = Int(g->Percent(50) ? 1 : 1 - rank);
  } else {
    batch = g->Uniform(0, rank - 1);
    do {
      seq = g->Uniform(0, rank - 1);
    } while (seq == batch);
    c.attrs["batch_axis"] = Int(g->Percent(40) ? batch - rank : batch);
    c.attrs["seq_axis"] = Int(g->Percent(40) ? seq - rank : seq);
  }
  const DType lt = g->Percent(50) ? g->Pick(kIntegerTypes) : g->Pick(kFloatTypes);
  std::vector<int64_t> lens;
  for (int64_t i = 0; i < shape[batch]; ++i) lens.push_back(g->LengthFor(lt, shape[seq]));
  TestTensor data = RandomTensor(dt, shape, g->rng());
  c.expected = ReferenceReverseSequence(data, batch, seq, lens);
  c.inputs = {std::move(data), Vec(lt, lens)};
  return c;
}

Case MakeRollCase(Gen* g) {
  Case c;
  c.op = g->Percent(10) ? "Roll-7" : "Roll";
  const DType dt = g->AnyDType();
  const Shape shape = g->RandomShape(0, 6);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const DType shift_type = g->Percent(50) ? DType::kInt32 : DType::kInt64;
  const DType axes_type = g->Percent(50) ? DType::kInt32 : DType::kInt64;
  TestTensor data = RandomTensor(dt, shape, g->rng());
  const int64_t n = rank == 0 ? 0 : g->Uniform(0, rank + 2);  // duplicates allowed
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < n; ++i) axes.push_back(RandomAxis(g, rank, true));
  auto random_shift = [&](int64_t axis) -> int64_t {
    const int64_t dim = shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    const int64_t p = g->Uniform(0, 99);
    if (p < 80) return g->Uniform(-3 * dim - 3, 3 * dim + 3);
    if (p < 95 || shift_type == DType::kInt32) {
      return g->Uniform(-2147483647LL - 1, 2147483647LL);
    }
    return g->Uniform(-(1LL << 50), 1LL << 50);
  };
  std::vector<int64_t> shift;
  TestTensor shift_tensor;
  const int64_t mode = n == 0 ? 99 : g->Uniform(0, 99);  // no axes: per-axis (empty) shift
  if (mode < 25) {
    shift = {random_shift(axes[0])};
    shift_tensor = ScalarOf(shift_type, shift[0]);
  } else if (mode < 40) {
    shift = {random_shift(axes[0])};
    shift_tensor = Vec(shift_type, shift);
  } else {
    for (int64_t a : axes) shift.push_back(random_shift(a));
    shift_tensor = Vec(shift_type, shift);
  }
  TestTensor axes_tensor =
      n == 1 && g->Percent(50) ? ScalarOf(axes_type, axes[0]) : Vec(axes_type, axes);
  c.expected = ReferenceRoll(data, shift, axes);
  c.inputs = {std::move(data), std::move(shift_tensor), std::move(axes_tensor)};
  return c;
}

Case MakeOnnxReverseSequenceCase(Gen* g) {
  Case c;
  c.op = "onnx.ReverseSequence";
  const DType dt = g->AnyDType();
  const Shape shape = g->RandomShape(2, 6);
  int64_t batch = 1, time = 0;
  if (g->Percent(50)) {
    batch = 0;
    time = 1;
    c.attrs = {{"batch_axis", Int(0)}, {"time_axis", Int(1)}};
  } else {
    if (g->Percent(50)) c.attrs["batch_axis"] = Int(1);
    if (g->Percent(50)) c.attrs["time_axis"] = Int(0);
  }
  const DType lt = g->Percent(50) ? DType::kInt32 : DType::kInt64;
  std::vector<int64_t> lens;
  for (int64_t i = 0; i < shape[batch]; ++i) lens.push_back(g->Uniform(0, shape[time]));
  TestTensor data = RandomTensor(dt, shape, g->rng());
  c.expected = ReferenceOnnxReverseSequence(data, batch, time, lens);
  c.inputs = {std::move(data), Vec(lt, lens)};
  return c;
}

// How a case is run. Every path must give the same bytes.
enum class Path {
  kExecuteOp,       // ExecuteOp: Prepare, then Run into a new Tensor
  kRun,             // PreparedOp::Run into a sentinel-filled buffer with a guard region
  kShuffledRanges,  // run_range over random disjoint parts, in random order
  kThreadPool,      // RunPrepared on a 3-thread pool, always split
};

const char* PathName(Path p) {
  switch (p) {
    case Path::kExecuteOp:
      return "ExecuteOp";
    case Path::kRun:
      return "Prepare+Run";
    case Path::kShuffledRanges:
      return "Prepare+run_range(shuffled parts)";
    case Path::kThreadPool:
      return "Prepare+RunPrepared(pool of 3)";
  }
  return "?";
}

ThreadPool* SharedPool() {
  static ThreadPool* const pool = new ThreadPool(3);
  return pool;
}

::testing::AssertionResult RunCase(const Case& c, Path path, uint64_t seed) {
  if (path == Path::kExecuteOp) {
    return Matches(c.expected, RunOp(c.op, c.inputs, c.attrs));
  }
  const absl::StatusOr<PreparedOp> p = PrepareOnly(c.op, c.inputs, c.attrs);
  if (!p.ok()) return ::testing::AssertionFailure() << "Prepare failed: " << p.status();
  if (p->dtype != c.expected.dtype || p->shape != c.expected.shape) {
    return ::testing::AssertionFailure() << "Prepare: output " << DTypeName(p->dtype)
                                         << VecToString({p->shape.begin(), p->shape.end()})
                                         << ", expected " << Describe(c.expected.view());
  }
  const int64_t bytes = p->output_bytes();
  std::vector<unsigned char> buffer(static_cast<size_t>(bytes + kGuardBytes), kSentinel);
  switch (path) {
    case Path::kRun:
      p->Run(buffer.data());
      break;
    case Path::kShuffledRanges: {
      std::mt19937_64 rng(seed);
      std::vector<std::pair<int64_t, int64_t>> parts;
      for (int64_t begin = 0; begin < p->units;) {
        const int64_t len = 1 + static_cast<int64_t>(rng() % 4);
        const int64_t end = std::min(p->units, begin + len);
        parts.emplace_back(begin, end);
        begin = end;
      }
      std::shuffle(parts.begin(), parts.end(), rng);
      for (const auto& [begin, end] : parts) p->run_range(buffer.data(), begin, end);
      break;
    }
    case Path::kThreadPool:
      RunPrepared(*p, buffer.data(), SharedPool(), /*min_parallel_bytes=*/0);
      break;
    default:
      break;
  }
  for (int64_t i = bytes; i < bytes + kGuardBytes; ++i) {
    if (buffer[static_cast<size_t>(i)] != kSentinel) {
      return ::testing::AssertionFailure() << "run wrote past the end of the output, at byte " << i
                                           << " of a " << bytes << "-byte output";
    }
  }
  return BitwiseEqual(c.expected.view(), TensorView{p->dtype, p->shape, buffer.data()});
}

void RunRandomCases(const char* name, uint64_t op_id, Case (*make)(Gen*), int cases = kCasesPerOp) {
  const uint64_t base = BaseSeed();
  int failures = 0;
  for (int i = 0; i < cases; ++i) {
    const uint64_t case_seed = SplitMix64(base ^ (op_id << 40) ^ static_cast<uint64_t>(i));
    Gen g(case_seed);
    const Case c = make(&g);
    const Path path = static_cast<Path>(case_seed % 4);
    const ::testing::AssertionResult result = RunCase(c, path, case_seed);
    if (!result) {
      ++failures;
      if (failures <= kMaxReportedFailures) {
        SCOPED_TRACE(absl::StrCat("TENSOROPS_RANDOM_SEED=", base, " ", name, " case ", i, " via ",
                                  PathName(path), ": ", DescribeCase(c)));
        EXPECT_TRUE(result);
      }
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases << " " << name
                         << " cases differ from the reference (TENSOROPS_RANDOM_SEED=" << base
                         << ")";
}

TEST(RandomCompare, Reverse) { RunRandomCases("Reverse", 1, MakeReverseCase); }
TEST(RandomCompare, ReverseSequence) {
  RunRandomCases("ReverseSequence", 2, MakeReverseSequenceCase);
}
TEST(RandomCompare, Roll) { RunRandomCases("Roll", 3, MakeRollCase); }
TEST(RandomCompare, OnnxReverseSequence) {
  RunRandomCases("onnx.ReverseSequence", 4, MakeOnnxReverseSequenceCase);
}

// The store paths the default settings do not reach on small tensors: the
// streaming stores (forced by a threshold of 0 bytes, so every plan streams)
// and each instruction set below the CPU's best (KernelIsa), each alone and
// together. Same generators and seeds as above, fewer cases per mode. (The
// whole binary also runs once per instruction set through
// TENSOROPS_KERNEL_ISA: tests/kernels/CMakeLists.txt.)
struct StoreMode {
  const char* name;
  int64_t streaming_min_bytes;  // -1: the default
  KernelIsa isa;
};

class StoreModeCompare : public ::testing::TestWithParam<StoreMode> {
 protected:
  void SetUp() override {
    SetStreamingStoreMinBytes(GetParam().streaming_min_bytes);
    SetKernelIsa(GetParam().isa);
  }
  void TearDown() override {
    SetStreamingStoreMinBytes(-1);
    SetKernelIsa(std::nullopt);
  }
};

constexpr int kCasesPerMode = 1500;

TEST_P(StoreModeCompare, AllOpsMatchReference) {
  RunRandomCases("Reverse", 1, MakeReverseCase, kCasesPerMode);
  RunRandomCases("ReverseSequence", 2, MakeReverseSequenceCase, kCasesPerMode);
  RunRandomCases("Roll", 3, MakeRollCase, kCasesPerMode);
  RunRandomCases("onnx.ReverseSequence", 4, MakeOnnxReverseSequenceCase, kCasesPerMode);
}

INSTANTIATE_TEST_SUITE_P(Modes, StoreModeCompare,
                         ::testing::Values(StoreMode{"streaming", 0, KernelIsa::kAvx2},
                                           StoreMode{"sse2", -1, KernelIsa::kSse2},
                                           StoreMode{"sse2_streaming", 0, KernelIsa::kSse2},
                                           StoreMode{"scalar", -1, KernelIsa::kScalar},
                                           StoreMode{"scalar_streaming", 0, KernelIsa::kScalar}),
                         [](const ::testing::TestParamInfo<StoreMode>& info) {
                           return std::string(info.param.name);
                         });

// TENSOROPS_KERNEL_ISA, when set, chose the kernels' instruction set (capped
// at the CPU's best): the CTest runs per instruction set test what they say.
TEST(KernelIsaTest, EnvironmentChoosesTheInstructionSet) {
  const char* env = std::getenv("TENSOROPS_KERNEL_ISA");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(ActiveKernelIsa(), CpuKernelIsa());
    return;
  }
  const std::optional<KernelIsa> want = ParseKernelIsa(env);
  ASSERT_TRUE(want.has_value()) << env;
  EXPECT_EQ(ActiveKernelIsa(), std::min(*want, CpuKernelIsa()));
  std::fprintf(stderr, "kernels run on %s (TENSOROPS_KERNEL_ISA=%s, CPU best %s)\n",
               KernelIsaName(ActiveKernelIsa()), env, KernelIsaName(CpuKernelIsa()));
}

// Outputs above the pool's 1 MiB threshold really split across threads;
// the result must equal the reference (and so the single-threaded run).
void ThreadedRunsMatchReference() {
  std::mt19937_64 rng(BaseSeed());
  ThreadPool pool(4);
  struct Large {
    DType dtype;
    Shape shape;
  };
  for (const Large& l :
       {Large{DType::kFloat32, {6, 50, 40, 30}}, Large{DType::kUInt8, {3, 7, 300, 500}},
        Large{DType::kString, {4, 30, 20, 45}}, Large{DType::kComplex128, {5, 3, 97, 101}}}) {
    SCOPED_TRACE(Describe(TensorView{l.dtype, l.shape, nullptr}));
    const TestTensor data = RandomTensor(l.dtype, l.shape, &rng);
    std::vector<Case> cases;
    {
      Case c;
      c.op = "Reverse";
      c.attrs = {{"mode", Str("index")}};
      c.inputs = {data, Vec(DType::kInt64, {1, -1})};
      c.expected = ReferenceReverse(data, {1, 3});
      cases.push_back(std::move(c));
    }
    {
      Case c;
      c.op = "Reverse";
      c.attrs = {{"mode", Str("mask")}};
      c.inputs = {data, Vec(DType::kBool, {1, 0, 1, 0})};
      c.expected = ReferenceReverse(data, {0, 2});
      cases.push_back(std::move(c));
    }
    {
      Case c;
      c.op = "Roll";
      c.inputs = {data, Vec(DType::kInt64, {1, -7, 3}), Vec(DType::kInt32, {0, 2, 3})};
      c.expected = ReferenceRoll(data, {1, -7, 3}, {0, 2, 3});
      cases.push_back(std::move(c));
    }
    {
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < l.shape[0]; ++i)
        lens.push_back(static_cast<int64_t>(rng() % (l.shape[2] + 1)));
      Case c;
      c.op = "ReverseSequence";
      c.attrs = {{"batch_axis", Int(0)}, {"seq_axis", Int(2)}};
      c.inputs = {data, Vec(DType::kInt32, lens)};
      c.expected = ReferenceReverseSequence(data, 0, 2, lens);
      cases.push_back(std::move(c));
    }
    {
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < l.shape[1]; ++i)
        lens.push_back(static_cast<int64_t>(rng() % (l.shape[0] + 1)));
      Case c;
      c.op = "onnx.ReverseSequence";
      c.inputs = {data, Vec(DType::kInt64, lens)};
      c.expected = ReferenceOnnxReverseSequence(data, 1, 0, lens);
      cases.push_back(std::move(c));
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(DescribeCase(c));
      const absl::StatusOr<PreparedOp> p = PrepareOnly(c.op, c.inputs, c.attrs);
      ASSERT_TRUE(p.ok()) << p.status();
      for (int64_t min_bytes : {int64_t{0}, int64_t{1} << 20}) {
        SCOPED_TRACE(absl::StrCat("min_parallel_bytes=", min_bytes));
        std::vector<unsigned char> out(static_cast<size_t>(p->output_bytes()), kSentinel);
        RunPrepared(*p, out.data(), &pool, min_bytes);
        EXPECT_TRUE(BitwiseEqual(c.expected.view(), TensorView{p->dtype, p->shape, out.data()}));
      }
      EXPECT_TRUE(Matches(c.expected, RunOp(c.op, c.inputs, c.attrs)));
    }
  }
}

TEST(LargeCompare, ThreadedRunsMatchReference) { ThreadedRunsMatchReference(); }

// The same with every plan streaming: workers write with non-temporal stores
// and fence before ParallelFor joins them.
TEST(LargeCompare, ThreadedStreamingRunsMatchReference) {
  SetStreamingStoreMinBytes(0);
  ThreadedRunsMatchReference();
  SetStreamingStoreMinBytes(-1);
}

// Runs a prepared case with streaming forced into an output 64-byte aligned
// and one 16 bytes past a line (the kernels have whole-line paths for the
// first), each by every output path: one Run, shuffled unit ranges, a pool
// of 3; on every instruction set.
void ExpectAlignedAndUnalignedRunsMatch(const Case& c, std::mt19937_64* rng) {
  SetStreamingStoreMinBytes(0);
  ThreadPool pool(3);
  const absl::StatusOr<PreparedOp> p = PrepareOnly(c.op, c.inputs, c.attrs);
  ASSERT_TRUE(p.ok()) << p.status();
  const int64_t bytes = p->output_bytes();
  for (int64_t offset : {0, 16}) {
    for (int way = 0; way < 9; ++way) {
      // Ways 3-5 repeat 0-2 on the SSE2 loops, 6-8 on the scalar ones.
      SetKernelIsa(way < 3 ? KernelIsa::kAvx2 : way < 6 ? KernelIsa::kSse2 : KernelIsa::kScalar);
      SCOPED_TRACE(absl::StrCat("output offset ", offset, " from a line, way ", way));
      std::vector<unsigned char> buffer(static_cast<size_t>(bytes + 128 + kGuardBytes), kSentinel);
      const uintptr_t base = reinterpret_cast<uintptr_t>(buffer.data());
      unsigned char* out = buffer.data() + ((64 - base % 64) % 64) + offset;
      if (way % 3 == 0) {
        p->Run(out);
      } else if (way % 3 == 1) {
        std::vector<std::pair<int64_t, int64_t>> parts;
        for (int64_t b = 0; b < p->units; b += 3) parts.emplace_back(b, std::min(p->units, b + 3));
        std::shuffle(parts.begin(), parts.end(), *rng);
        for (const auto& [b, e] : parts) p->run_range(out, b, e);
      } else {
        RunPrepared(*p, out, &pool, /*min_parallel_bytes=*/0);
      }
      EXPECT_TRUE(BitwiseEqual(c.expected.view(), TensorView{p->dtype, p->shape, out}));
      for (int64_t i = bytes; i < bytes + kGuardBytes; ++i) {
        ASSERT_EQ(out[i], kSentinel) << "wrote past the end, at byte " << i;
      }
    }
  }
  SetStreamingStoreMinBytes(-1);
  SetKernelIsa(std::nullopt);
}

// Time-major ReverseSequence with blocks of whole lines scatters input rows
// into an aligned output (sequence_reverse.cc); unaligned, the column walk.
TEST(LargeCompare, TimeMajorScatterMatchesReference) {
  std::mt19937_64 rng(BaseSeed());
  struct Shaped {
    DType dtype;
    Shape shape;    // ONNX: [time, batch, ...]; OpenVINO: seq_axis 0, batch_axis 2
    bool openvino;  // OpenVINO's op with a dim between the sequence and batch axes
  };
  for (const Shaped& sh :
       {Shaped{DType::kUInt8, {37, 9, 64}, false}, Shaped{DType::kFloat32, {20, 5, 16}, false},
        Shaped{DType::kFloat16, {33, 4, 2, 32}, false},
        Shaped{DType::kFloat64, {17, 3, 6, 8}, true},
        Shaped{DType::kUInt8, {50, 2, 7, 128}, true}}) {
    SCOPED_TRACE(Describe(TensorView{sh.dtype, sh.shape, nullptr}));
    const TestTensor data = RandomTensor(sh.dtype, sh.shape, &rng);
    const int64_t batch_axis = sh.openvino ? 2 : 1;
    std::vector<int64_t> lens;
    for (int64_t i = 0; i < sh.shape[batch_axis]; ++i) {
      // Mixed lengths, with runs of equal ones so neighbouring batches share rows.
      lens.push_back(i % 3 == 2 ? lens.back() : static_cast<int64_t>(rng() % (sh.shape[0] + 1)));
    }
    Case c;
    if (sh.openvino) {
      c.op = "ReverseSequence";
      c.attrs = {{"batch_axis", Int(batch_axis)}, {"seq_axis", Int(0)}};
      c.inputs = {data, Vec(DType::kInt64, lens)};
      c.expected = ReferenceReverseSequence(data, batch_axis, 0, lens);
    } else {
      c.op = "onnx.ReverseSequence";
      c.inputs = {data, Vec(DType::kInt64, lens)};
      c.expected = ReferenceOnnxReverseSequence(data, 1, 0, lens);
    }
    ExpectAlignedAndUnalignedRunsMatch(c, &rng);
  }
}

// Roll along the innermost moved dim with rows of whole lines streams each
// rolled row straight from the input into an aligned output (strided_copy.cc:
// one line per row straddles the wrap); unaligned, the L1 scratch row. Shifts
// at, near and away from line boundaries, and rows longer than the scratch.
TEST(LargeCompare, RolledRowsMatchReference) {
  std::mt19937_64 rng(BaseSeed() + 1);
  struct Rolled {
    DType dtype;
    Shape shape;
    std::vector<int64_t> shift, axes;
  };
  for (const Rolled& r :
       {Rolled{DType::kUInt8, {9, 7, 64}, {3, -1}, {0, 2}},
        Rolled{DType::kUInt8, {5, 256}, {64}, {1}}, Rolled{DType::kUInt8, {6, 192}, {-65}, {1}},
        Rolled{DType::kFloat32, {4, 3, 48}, {1, 47}, {1, 2}},
        Rolled{DType::kFloat16, {11, 96}, {-5}, {1}},
        Rolled{DType::kFloat64, {3, 5, 8, 2}, {2, -3}, {0, 2}},
        Rolled{DType::kFloat64, {3, 2048}, {1000}, {1}}}) {
    SCOPED_TRACE(Describe(TensorView{r.dtype, r.shape, nullptr}));
    const TestTensor data = RandomTensor(r.dtype, r.shape, &rng);
    Case c;
    c.op = "Roll";
    c.inputs = {data, Vec(DType::kInt64, r.shift), Vec(DType::kInt64, r.axes)};
    c.expected = ReferenceRoll(data, r.shift, r.axes);
    ExpectAlignedAndUnalignedRunsMatch(c, &rng);
  }
}

// The generators themselves: the same seed gives the same case.
TEST(RandomCompare, GeneratorIsDeterministic) {
  for (uint64_t seed : {1ull, 2ull, 99ull}) {
    Gen a(seed), b(seed);
    const Case ca = MakeRollCase(&a);
    const Case cb = MakeRollCase(&b);
    EXPECT_EQ(DescribeCase(ca), DescribeCase(cb));
    EXPECT_TRUE(BitwiseEqual(ca.inputs[0].view(), cb.inputs[0].view()));
  }
}

}  // namespace
}  // namespace test
}  // namespace tensorops
