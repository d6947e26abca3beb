// What a big streamed call pays per byte besides the transport, each against
// memcpy in the same run (docs/benchmarks-history.md "Streaming: what
// changed"):
//   BM_Crc32       the CRC-32 as wire/crc32.h computes it (ISA-L) ...
//   BM_ZlibCrc32   ... and as zlib's crc32 does (the same bits);
//   BM_FreshPages  writing a buffer just mapped (first-touch page faults,
//                  huge pages advised as for Tensor), then unmapping it;
//   BM_CachedPages the same through kernels/buffer_cache.h, which hands the
//                  last buffer back;
//   BM_Memcpy      the baseline: copying into a buffer written before.
// Bytes per second in each row's "bytes_per_second".
#include <sys/mman.h>
#include <zlib.h>

#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/buffer_cache.h"
#include "kernels/huge_pages.h"
#include "wire/crc32.h"

namespace tensorops {
namespace {

std::vector<char> Source(int64_t n) {
  std::vector<char> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131 + (i >> 7));
  return v;
}

void BM_Crc32(benchmark::State& state) {
  const std::vector<char> src = Source(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(Crc32(0, src.data(), state.range(0)));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_ZlibCrc32(benchmark::State& state) {
  const std::vector<char> src = Source(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_z(0, reinterpret_cast<const Bytef*>(src.data()),
                                     static_cast<z_size_t>(state.range(0))));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Memcpy(benchmark::State& state) {
  const std::vector<char> src = Source(state.range(0));
  std::vector<char> dst(src.size(), 1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_FreshPages(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    AdviseHugePages(p, static_cast<int64_t>(n));
    std::memset(p, 1, n);
    benchmark::ClobberMemory();
    munmap(p, n);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_CachedPages(benchmark::State& state) {
  BufferCache cache(int64_t{4} << 30, absl::Seconds(60));
  for (auto _ : state) {
    int64_t capacity = 0;
    char* p = cache.Allocate(state.range(0), &capacity);
    std::memset(p, 1, static_cast<size_t>(state.range(0)));
    benchmark::ClobberMemory();
    cache.Release(p, capacity);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

constexpr int64_t kMiB = int64_t{1} << 20;
BENCHMARK(BM_Crc32)->Arg(kMiB)->Arg(256 * kMiB)->UseRealTime();
BENCHMARK(BM_ZlibCrc32)->Arg(kMiB)->Arg(256 * kMiB)->UseRealTime();
BENCHMARK(BM_Memcpy)->Arg(kMiB)->Arg(256 * kMiB)->UseRealTime();
BENCHMARK(BM_FreshPages)->Arg(256 * kMiB)->UseRealTime();
BENCHMARK(BM_CachedPages)->Arg(256 * kMiB)->UseRealTime();

}  // namespace
}  // namespace tensorops

BENCHMARK_MAIN();
