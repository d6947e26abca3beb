// Kernel throughput against memcpy of the same bytes, measured in this binary.
//
// Each case reports `x_memcpy`: its bytes/s over memcpy's bytes/s for the
// same byte count and thread count (1 thread: plain memcpy; 2 threads: memcpy
// split in two halves on the same pool). The memcpy of the case's input into
// a second warm buffer runs after every kernel iteration (untimed by the
// benchmark, timed by the case), so kernel and baseline alternate and see the
// same machine state: on the shared VM other processes come and go within a
// second. Output buffers are preallocated and warm, allocated as the server
// allocates its outputs.
// Chain cases (Chain/...) also report x_one_op: the chain's first op alone
// over the whole chain, on the same tensor and threads.
// Run: build/bench/kernels_bench [--benchmark_filter=...]
// Sizes: 16 MiB by default; TENSOROPS_BENCH_LARGE=1 adds 256 MiB.
// TENSOROPS_STREAMING_MIN_BYTES=N overrides the kernels' streaming-store
// threshold (kernels/streaming_store.h), e.g. 1e18 for ordinary stores only.
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_isa.h"
#include "kernels/op_registry.h"
#include "kernels/streaming_store.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"

namespace tensorops {
namespace {

ThreadPool& Pool2() {
  static ThreadPool* pool = new ThreadPool(2);
  return *pool;
}

// An output buffer as the server allocates one (a Tensor: from 8 MiB a
// page-aligned BufferCache mapping with huge pages advised; below it the heap).
struct Buffer {
  explicit Buffer(int64_t n) : tensor(DType::kUInt8, Shape{n}) {
    std::memset(tensor.mutable_data(), 1, n);  // fault every page in before timing
  }
  char* data() { return static_cast<char*>(tensor.mutable_data()); }
  Tensor tensor;
};

// memcpy of `bytes` on `threads` threads (two: halves on Pool2()).
void Memcpy(char* dst, const char* src, int64_t bytes, int threads) {
  if (threads == 1) {
    std::memcpy(dst, src, bytes);
  } else {
    Pool2().ParallelFor(2, 1, [&](int64_t b, int64_t e) {
      const int64_t lo = bytes * b / 2, hi = bytes * e / 2;
      std::memcpy(dst + lo, src + lo, hi - lo);
    });
  }
  benchmark::DoNotOptimize(dst);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of the whole process (the caller and the pool's workers).
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

const OpRegistry& Registry() {
  static OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    RegisterBuiltinOps(reg);
    return reg;
  }();
  return *r;
}

using Extra = std::vector<std::pair<DType, std::vector<int64_t>>>;  // index inputs as int64 values

// One op after the first of a chain case.
struct CaseStep {
  std::string op;
  Extra extra;
  Attrs attrs;
};

struct Case {
  std::string name;
  std::string op;
  DType dtype;
  Shape shape;
  Extra extra;
  Attrs attrs;
  // A chain: ops after the first (OpRegistry::PrepareChain). Such a case also
  // times its first op alone on the same tensor and reports x_one_op, the
  // single op's time over the chain's (>= 0.83: the chain costs at most 1.2x).
  std::vector<CaseStep> then = {};
};

std::vector<char> Pack(DType dtype, const std::vector<int64_t>& v) {
  std::vector<char> out(v.size() * ElementWidth(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kInt64) {
      std::memcpy(out.data() + 8 * i, &v[i], 8);
    } else if (dtype == DType::kInt32) {
      int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else if (dtype == DType::kBool) {
      out[i] = v[i] != 0;
    }
  }
  return out;
}

void RunCase(benchmark::State& state, const Case& c, int threads) {
  Tensor data(c.dtype, c.shape);
  std::memset(data.mutable_data(), 7, data.num_bytes());
  std::vector<std::vector<char>> storage;
  std::vector<TensorView> inputs = {data.view()};
  for (const auto& [dt, values] : c.extra) {
    storage.push_back(Pack(dt, values));
    inputs.push_back(
        TensorView{dt, Shape{static_cast<int64_t>(values.size())}, storage.back().data()});
  }
  std::vector<ChainStep> steps;
  for (const CaseStep& step : c.then) {
    ChainStep cs{step.op, {}, step.attrs};
    for (const auto& [dt, values] : step.extra) {
      storage.push_back(Pack(dt, values));
      cs.inputs.push_back(
          TensorView{dt, Shape{static_cast<int64_t>(values.size())}, storage.back().data()});
    }
    steps.push_back(std::move(cs));
  }
  auto prepared = Registry().PrepareChain(c.op, inputs, c.attrs, steps);
  auto one_op = Registry().Prepare(c.op, inputs, c.attrs);
  if (!prepared.ok() || !one_op.ok()) {
    state.SkipWithError(
        std::string((prepared.ok() ? one_op : prepared).status().message()).c_str());
    return;
  }
  const int64_t bytes = data.num_bytes();
  Buffer out(bytes), copy(bytes);
  ThreadPool* pool = threads == 2 ? &Pool2() : nullptr;
  // Warm both paths once (first touch of the pool's threads, the caches).
  RunPrepared(*prepared, out.data(), pool);
  if (!steps.empty()) RunPrepared(*one_op, out.data(), pool);
  Memcpy(copy.data(), static_cast<const char*>(data.view().data), bytes, threads);
  double kernel_s = 0, memcpy_s = 0, kernel_cpu = 0, memcpy_cpu = 0, one_op_s = 0;
  double kernel_best = 1e30, memcpy_best = 1e30;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = ProcessCpuSeconds();
    RunPrepared(*prepared, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
    const double ks = Seconds(t0);
    kernel_s += ks;
    kernel_best = std::min(kernel_best, ks);
    kernel_cpu += ProcessCpuSeconds() - c0;
    state.PauseTiming();
    t0 = std::chrono::steady_clock::now();
    c0 = ProcessCpuSeconds();
    Memcpy(copy.data(), static_cast<const char*>(data.view().data), bytes, threads);
    const double ms = Seconds(t0);
    memcpy_s += ms;
    memcpy_best = std::min(memcpy_best, ms);
    memcpy_cpu += ProcessCpuSeconds() - c0;
    if (!steps.empty()) {
      t0 = std::chrono::steady_clock::now();
      RunPrepared(*one_op, out.data(), pool);
      one_op_s += Seconds(t0);
    }
    state.ResumeTiming();
  }
  if (!steps.empty()) {
    state.counters["x_one_op"] = kernel_s > 0 ? one_op_s / kernel_s : 0;
    state.counters["passes"] = static_cast<double>(prepared->then.size() + 1);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  // Same iterations of both, alternating: the ratio of their total times.
  state.counters["x_memcpy"] = kernel_s > 0 ? memcpy_s / kernel_s : 0;
  // The same from CPU time: on a loaded machine wall time mostly measures how
  // long the scheduler kept the process off the CPU; CPU time still includes
  // the cycles stalled on memory, which is what the kernels are about.
  state.counters["x_memcpy_cpu"] = kernel_cpu > 0 ? memcpy_cpu / kernel_cpu : 0;
  // The best of each over the iterations: the run that had the machine to
  // itself. Steadier than the totals when other processes come and go.
  state.counters["x_memcpy_best"] = kernel_best < 1e30 ? memcpy_best / kernel_best : 0;
}

// Sequence lengths for `batch` sequences of up to `seq` steps: spread over
// 0..seq (every length the kernels treat apart: 0, 1, partial, whole).
std::vector<int64_t> SequenceLengths(int64_t batch, int64_t seq) {
  std::vector<int64_t> lens;
  for (int64_t i = 0; i < batch; ++i) lens.push_back((i * 7919) % (seq + 1));
  return lens;
}

// One op per case for element type `dt`, `bytes` in all.
void AddOpCases(DType dt, int64_t bytes, std::vector<Case>* out) {
  std::vector<Case>& cases = *out;
  const Attrs index{{"mode", AttrValue::String("index")}};
  const Attrs mask{{"mode", AttrValue::String("mask")}};
  const int64_t w = ElementWidth(dt);
  const int64_t n = bytes / w;
  const std::string t = std::string(DTypeName(dt));
  const std::string sz = std::to_string(bytes >> 20) + "MiB";
  // [a, b, c] with c = 256 elements per row.
  const int64_t c = 256, a = 64, b = n / (a * c);
  const Shape s3 = {a, b, c};
  auto idx = [](std::vector<int64_t> v) {
    return std::vector<std::pair<DType, std::vector<int64_t>>>{{DType::kInt64, v}};
  };
  cases.push_back({"Reverse/first_axis/" + t + "/" + sz, "Reverse", dt, s3, idx({0}), index});
  cases.push_back({"Reverse/last_axis/" + t + "/" + sz, "Reverse", dt, s3, idx({2}), index});
  cases.push_back({"Reverse/middle_axis/" + t + "/" + sz, "Reverse", dt, s3, idx({1}), index});
  cases.push_back({"Reverse/all_axes/" + t + "/" + sz, "Reverse", dt, s3, idx({0, 1, 2}), index});
  cases.push_back(
      {"Reverse/mask_0_1/" + t + "/" + sz, "Reverse", dt, s3, {{DType::kBool, {1, 1, 0}}}, mask});
  // ReverseSequence: batch-major [batch 64, seq b, 256] and time-major [seq b, batch 64, 256].
  const std::vector<int64_t> lens = SequenceLengths(a, b);
  cases.push_back({"ReverseSequence/batch_major/" + t + "/" + sz,
                   "ReverseSequence",
                   dt,
                   s3,
                   {{DType::kInt64, lens}},
                   {{"batch_axis", AttrValue::Number(0)}, {"seq_axis", AttrValue::Number(1)}}});
  cases.push_back({"ReverseSequence/time_major/" + t + "/" + sz,
                   "onnx.ReverseSequence",
                   dt,
                   Shape{b, a, c},
                   {{DType::kInt64, lens}},
                   {}});
  cases.push_back({"Roll/1_axis/" + t + "/" + sz,
                   "Roll",
                   dt,
                   s3,
                   {{DType::kInt64, {-3}}, {DType::kInt64, {1}}},
                   {}});
  cases.push_back({"Roll/2_axes/" + t + "/" + sz,
                   "Roll",
                   dt,
                   s3,
                   {{DType::kInt64, {5, -17}}, {DType::kInt64, {0, 2}}},
                   {}});
  cases.push_back({"Roll/3_axes_repeated/" + t + "/" + sz,
                   "Roll",
                   dt,
                   s3,
                   {{DType::kInt64, {1, -2, 3, 40}}, {DType::kInt64, {0, 1, 2, 0}}},
                   {}});
}

// Chains of 2, 4 and 8 ops on [64, b, 256]: Reverses and Rolls on
// different axes (one composed pass), and with a batch-major
// ReverseSequence (fused rows of [seq, 256] runs).
void AddChainCases(DType dt, int64_t bytes, std::vector<Case>* out) {
  std::vector<Case>& cases = *out;
  const Attrs index{{"mode", AttrValue::String("index")}};
  const int64_t w = ElementWidth(dt);
  const int64_t c = 256, a = 64, b = bytes / w / (a * c);
  const Shape s3 = {a, b, c};
  const std::string suffix =
      "/" + std::string(DTypeName(dt)) + "/" + std::to_string(bytes >> 20) + "MiB";
  auto rev = [&](int64_t axis) { return CaseStep{"Reverse", {{DType::kInt64, {axis}}}, index}; };
  auto roll = [](int64_t shift, int64_t axis) {
    return CaseStep{"Roll", {{DType::kInt64, {shift}}, {DType::kInt64, {axis}}}, {}};
  };
  const std::vector<int64_t> lens = SequenceLengths(a, b);
  const CaseStep seq{"ReverseSequence",
                     {{DType::kInt64, lens}},
                     {{"batch_axis", AttrValue::Number(0)}, {"seq_axis", AttrValue::Number(1)}}};
  const Extra axis0 = {{DType::kInt64, {0}}};
  cases.push_back({"Chain/2_reverse_roll" + suffix, "Reverse", dt, s3, axis0, index, {roll(5, 2)}});
  cases.push_back({"Chain/4_reverse_roll" + suffix,
                   "Reverse",
                   dt,
                   s3,
                   axis0,
                   index,
                   {roll(-3, 2), rev(1), roll(7, 0)}});
  cases.push_back({"Chain/8_reverse_roll" + suffix,
                   "Reverse",
                   dt,
                   s3,
                   axis0,
                   index,
                   {roll(-3, 2), rev(1), roll(7, 0), rev(2), roll(11, 1), rev(0), roll(1, 2)}});
  cases.push_back({"Chain/4_with_sequence" + suffix,
                   "Reverse",
                   dt,
                   s3,
                   axis0,
                   index,
                   {roll(-3, 2), seq, roll(7, 1)}});
  cases.push_back({"Chain/8_with_sequence" + suffix,
                   "Reverse",
                   dt,
                   s3,
                   axis0,
                   index,
                   {roll(-3, 2), rev(1), seq, roll(7, 0), rev(2), roll(11, 1), rev(1)}});
}

// Shapes with `bytes` total for element width w.
std::vector<Case> Cases(int64_t bytes) {
  std::vector<Case> cases;
  for (DType dt : {DType::kFloat32, DType::kUInt8, DType::kFloat16, DType::kFloat64}) {
    AddOpCases(dt, bytes, &cases);
  }
  for (DType dt : {DType::kFloat32, DType::kUInt8}) AddChainCases(dt, bytes, &cases);
  return cases;
}

// Validation + dispatch for a 4 KiB tensor: Prepare + Run, per call.
void BM_Small4KiB(benchmark::State& state) {
  Tensor data(DType::kFloat32, Shape{32, 32});
  std::memset(data.mutable_data(), 3, data.num_bytes());
  int64_t shift[2] = {1, -2}, axes[2] = {0, 1};
  std::vector<TensorView> inputs = {
      data.view(), {DType::kInt64, Shape{2}, shift}, {DType::kInt64, Shape{2}, axes}};
  Buffer out(data.num_bytes());
  const Attrs attrs;
  for (auto _ : state) {
    auto p = Registry().Prepare("Roll", inputs, attrs);
    p->Run(out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * data.num_bytes());
}
BENCHMARK(BM_Small4KiB);

void BM_Memcpy4KiB(benchmark::State& state) {
  Buffer src(4096), dst(4096);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), 4096);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * 4096);
}
BENCHMARK(BM_Memcpy4KiB);

void RegisterAll() {
  std::vector<int64_t> sizes = {int64_t{16} << 20};
  if (std::getenv("TENSOROPS_BENCH_LARGE") != nullptr) sizes.push_back(int64_t{256} << 20);
  for (int64_t bytes : sizes) {
    for (const Case& c : Cases(bytes)) {
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark(
            (c.name + "/threads:" + std::to_string(threads)).c_str(),
            [c, threads](benchmark::State& st) { RunCase(st, c, threads); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
}

}  // namespace
}  // namespace tensorops

int main(int argc, char** argv) {
  if (const char* v = std::getenv("TENSOROPS_STREAMING_MIN_BYTES")) {
    tensorops::SetStreamingStoreMinBytes(static_cast<int64_t>(std::strtod(v, nullptr)));
  }
  benchmark::Initialize(&argc, argv);
  // The CPU, its flags and the kernels' path, in the JSON's context and on
  // stderr: a figure is only comparable with one taken on the same path.
  const std::string isa_report = tensorops::KernelIsaReport();
  benchmark::AddCustomContext("kernel_isa", isa_report);
  std::fprintf(stderr, "kernels_bench: %s\n", isa_report.c_str());
  tensorops::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
