#include "kernels/kernel_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace tensorops {
namespace {

std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return std::string();
}

CpuInfo Detect() {
  CpuInfo cpu;
  cpu.model = ReadCpuModel();
#if defined(__x86_64__)
  // May run from a static initializer: make sure libgcc has read CPUID.
  __builtin_cpu_init();
  cpu.sse2 = __builtin_cpu_supports("sse2");
  cpu.ssse3 = __builtin_cpu_supports("ssse3");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  cpu.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
#endif
  return cpu;
}

KernelIsa BestIsa(const CpuInfo& cpu) {
#if defined(__x86_64__)
  return cpu.avx2 ? KernelIsa::kAvx2 : KernelIsa::kSse2;
#else
  (void)cpu;
  return KernelIsa::kScalar;
#endif
}

// TENSOROPS_KERNEL_ISA, capped at what the CPU has. A value that is not a
// level, or one the CPU lacks, is reported once on stderr: a benchmark or a
// test that asked for a path must not silently measure another.
KernelIsa StartupIsa() {
  const KernelIsa best = CpuKernelIsa();
  const char* env = std::getenv("TENSOROPS_KERNEL_ISA");
  if (env == nullptr || *env == '\0') return best;
  const std::optional<KernelIsa> want = ParseKernelIsa(env);
  if (!want.has_value()) {
    std::fprintf(stderr,
                 "tensorops: TENSOROPS_KERNEL_ISA=%s is not avx2, sse2 or scalar; using %s\n", env,
                 KernelIsaName(best));
    return best;
  }
  if (*want > best) {
    std::fprintf(stderr, "tensorops: TENSOROPS_KERNEL_ISA=%s: this CPU lacks it; using %s\n", env,
                 KernelIsaName(best));
    return best;
  }
  return *want;
}

KernelIsa StartupIsaOnce() {
  static const KernelIsa isa = StartupIsa();
  return isa;
}

// SetKernelIsa's override; -1: none.
std::atomic<int> g_isa_override{-1};

}  // namespace

const CpuInfo& DetectedCpu() {
  static const CpuInfo* const cpu = new CpuInfo(Detect());
  return *cpu;
}

KernelIsa CpuKernelIsa() {
  static const KernelIsa best = BestIsa(DetectedCpu());
  return best;
}

KernelIsa ActiveKernelIsa() {
  const int o = g_isa_override.load(std::memory_order_relaxed);
  return o >= 0 ? static_cast<KernelIsa>(o) : StartupIsaOnce();
}

void SetKernelIsa(std::optional<KernelIsa> isa) {
  g_isa_override.store(isa.has_value() ? static_cast<int>(std::min(*isa, CpuKernelIsa())) : -1,
                       std::memory_order_relaxed);
}

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kSse2:
      return "sse2";
    case KernelIsa::kScalar:
      return "scalar";
  }
  return "scalar";
}

std::optional<KernelIsa> ParseKernelIsa(std::string_view name) {
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kSse2, KernelIsa::kAvx2}) {
    if (name == KernelIsaName(isa)) return isa;
  }
  return std::nullopt;
}

std::string KernelIsaReport() {
  const CpuInfo& cpu = DetectedCpu();
  std::string flags;
  const std::pair<bool, const char*> named[] = {{cpu.sse2, "sse2"},
                                                {cpu.ssse3, "ssse3"},
                                                {cpu.avx2, "avx2"},
                                                {cpu.avx512f, "avx512f"},
                                                {cpu.avx512bw, "avx512bw"},
                                                {cpu.avx512vl, "avx512vl"},
                                                {cpu.avx512vbmi, "avx512vbmi"}};
  for (const auto& [has, name] : named) {
    if (!has) continue;
    if (!flags.empty()) flags += ' ';
    flags += name;
  }
  std::string report = (cpu.model.empty() ? std::string("unknown CPU") : cpu.model) + "; flags " +
                       (flags.empty() ? std::string("none") : flags) + "; kernels on " +
                       KernelIsaName(ActiveKernelIsa()) + " (CPU best " +
                       KernelIsaName(CpuKernelIsa()) + ")";
  if (cpu.avx512f) report += ", AVX-512 present but not used (no avx512 level built)";
  return report;
}

}  // namespace tensorops
