// kernels/kernel_isa: the detection, the override and the one dispatch; and
// every kernel with ISA variants run on each level this CPU has, its output
// compared byte for byte with the scalar level's. Levels the CPU lacks are
// skipped and named in one printed line.
#include "kernels/kernel_isa.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/reverse_rows.h"
#include "kernels/sequence_reverse.h"
#include "kernels/streaming_store.h"
#include "kernels/strided_copy.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

constexpr KernelIsa kAllIsas[] = {KernelIsa::kScalar, KernelIsa::kSse2, KernelIsa::kAvx2};

// A kernel that records the tag it was instantiated with.
struct WhichIsa {
  template <typename Isa>
  static void Run(KernelIsa* out) {
    *out = Isa::kIsa;
  }
};

TEST(KernelIsaDispatchTest, RunsTheActiveLevelsVariant) {
  for (KernelIsa isa : kAllIsas) {
    if (!CpuHasKernelIsa(isa)) continue;
    SCOPED_TRACE(KernelIsaName(isa));
    SetKernelIsa(isa);
    KernelIsa got = KernelIsa::kScalar;
    IsaDispatch<WhichIsa>::Run(&got);
    EXPECT_EQ(got, isa);
    got = KernelIsa::kAvx2;
    IsaDispatch<WhichIsa>::On<KernelIsa*>(KernelIsa::kScalar)(&got);
    EXPECT_EQ(got, KernelIsa::kScalar);
  }
  SetKernelIsa(std::nullopt);
}

TEST(KernelIsaDetectTest, BestLevelFollowsTheCpuFlags) {
  const CpuInfo& cpu = DetectedCpu();
#if defined(__x86_64__)
  EXPECT_TRUE(cpu.sse2);  // baseline x86-64
  EXPECT_EQ(CpuKernelIsa(), cpu.avx2 ? KernelIsa::kAvx2 : KernelIsa::kSse2);
  // The AVX-512 subsets imply the foundation.
  if (cpu.avx512bw || cpu.avx512vl || cpu.avx512vbmi) {
    EXPECT_TRUE(cpu.avx512f);
  }
#else
  EXPECT_EQ(CpuKernelIsa(), KernelIsa::kScalar);
#endif
  const std::string report = KernelIsaReport();
  EXPECT_NE(report.find(std::string("kernels on ") + KernelIsaName(ActiveKernelIsa())),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("AVX-512 present") != std::string::npos, cpu.avx512f) << report;
  std::printf("kernel_isa: %s\n", report.c_str());
}

// A 64-byte aligned buffer of `bytes` plus 64 bytes of guard on each side.
struct Aligned {
  explicit Aligned(int64_t bytes) : storage(bytes + 256, 0x5A) {
    data = storage.data() + 64 + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  }
  std::vector<char> storage;
  char* data;
};

// Nothing written in the 64 bytes before and after the output.
bool GuardsIntact(const Aligned& b, int64_t bytes) {
  for (int64_t i = 1; i <= 64; ++i) {
    if (b.data[-i] != 0x5A || b.data[bytes + i - 1] != 0x5A) return false;
  }
  return true;
}

// One kernel call: writes its output into `out` (sized like the input).
using KernelCall = std::function<void(const char* in, char* out)>;

struct KernelCase {
  std::string name;
  int64_t bytes;
  KernelCall call;
};

std::vector<KernelCase> Cases() {
  std::vector<KernelCase> cases;
  for (bool stream : {false, true}) {
    for (int64_t block : {1, 2, 4, 8, 16, 24}) {
      // Rows of 31 and 256 elements: the vector loops' ends and middles.
      for (int64_t n : {31, 256}) {
        const int64_t rows = 9;
        cases.push_back({"ReverseRows block " + std::to_string(block) + " n " + std::to_string(n) +
                             (stream ? " streamed" : ""),
                         rows * n * block, [=](const char* in, char* out) {
                           ReverseRows(out, in, n, block, rows, n * block, n * block, stream);
                         }});
      }
    }
  }
  for (int64_t n : {1, 63, 64, 200, 4099}) {
    cases.push_back({"CopyBytes streamed " + std::to_string(n), n,
                     [=](const char* in, char* out) { CopyBytes(out, in, n, true); }});
  }
  // Whole-line rows rolled and reverse-rolled (rolled_rows.cc), and a
  // last-axis reversal, as plans past the streaming threshold.
  for (int64_t w : {1, 2, 4, 8, 16}) {
    const int64_t n = 256 / w;
    const Shape shape{12, n};
    for (DimTransform inner :
         {DimTransform::Roll(5), DimTransform::ReverseRoll(3), DimTransform::Reverse()}) {
      cases.push_back(
          {"AxisTransformPlan w " + std::to_string(w) + " kind " +
               std::to_string(static_cast<int>(inner.kind)),
           12 * n * w, [=](const char* in, char* out) {
             AxisTransformPlan(shape, w, {DimTransform::Reverse(), inner}, true).Run(in, out);
           }});
    }
  }
  // Time-major ReverseSequence with whole-line blocks: the scatter.
  cases.push_back(
      {"SequenceReversePlan time-major scatter", 6 * 4 * 64, [](const char* in, char* out) {
         SetStreamingStoreMinBytes(0);
         SequenceReversePlan(Shape{6, 4, 16}, 4, 1, 0, {6, 0, 3, 5}).Run(in, out);
         SetStreamingStoreMinBytes(-1);
       }});
  return cases;
}

// Each variant the CPU has writes exactly the scalar variant's bytes, and
// nothing outside the output.
TEST(KernelIsaVariantsTest, EveryVariantMatchesScalar) {
  std::mt19937 rng(::tensorops::testing::TestSeed(41));
  std::string ran, skipped;
  for (KernelIsa isa : kAllIsas) {
    std::string& list = CpuHasKernelIsa(isa) ? ran : skipped;
    list += std::string(list.empty() ? "" : " ") + KernelIsaName(isa);
  }
  std::printf("kernel_isa: variants run: %s; skipped (this CPU lacks them): %s\n", ran.c_str(),
              skipped.empty() ? "none" : skipped.c_str());
  for (const KernelCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<char> in(c.bytes);
    for (char& b : in) b = static_cast<char>(rng());
    Aligned want(c.bytes);
    SetKernelIsa(KernelIsa::kScalar);
    c.call(in.data(), want.data);
    StreamFence();
    ASSERT_TRUE(GuardsIntact(want, c.bytes));
    // The scalar output holds the input's bytes (a kernel that wrote nothing
    // would match itself on every level).
    std::vector<char> sorted_in = in, sorted_out(want.data, want.data + c.bytes);
    std::sort(sorted_in.begin(), sorted_in.end());
    std::sort(sorted_out.begin(), sorted_out.end());
    ASSERT_EQ(sorted_in, sorted_out);
    for (KernelIsa isa : kAllIsas) {
      if (isa == KernelIsa::kScalar || !CpuHasKernelIsa(isa)) continue;
      SCOPED_TRACE(KernelIsaName(isa));
      SetKernelIsa(isa);
      Aligned got(c.bytes);
      c.call(in.data(), got.data);
      StreamFence();
      ASSERT_EQ(std::memcmp(got.data, want.data, c.bytes), 0);
      ASSERT_TRUE(GuardsIntact(got, c.bytes));
    }
  }
  SetKernelIsa(std::nullopt);
}

}  // namespace
}  // namespace tensorops
