#include "kernels/streaming_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

namespace tensorops {
namespace {

std::atomic<int64_t> g_min_bytes{kDefaultStreamingStoreMinBytes};

KernelIsa DetectCpuIsa() {
#if defined(__x86_64__)
  // Called from a static initializer: make sure libgcc has read CPUID.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? KernelIsa::kAvx2 : KernelIsa::kSse2;
#else
  return KernelIsa::kScalar;
#endif
}
const KernelIsa kCpuIsa = DetectCpuIsa();

// TENSOROPS_KERNEL_ISA, capped at what the CPU has. A value that is not a
// level, or one the CPU lacks, is reported once on stderr: a benchmark or a
// test that asked for a path must not silently measure another.
KernelIsa StartupIsa() {
  const char* env = std::getenv("TENSOROPS_KERNEL_ISA");
  if (env == nullptr || *env == '\0') return kCpuIsa;
  const std::optional<KernelIsa> want = ParseKernelIsa(env);
  if (!want.has_value()) {
    std::fprintf(stderr,
                 "tensorops: TENSOROPS_KERNEL_ISA=%s is not avx2, sse2 or scalar; using %s\n", env,
                 KernelIsaName(kCpuIsa));
    return kCpuIsa;
  }
  if (*want > kCpuIsa) {
    std::fprintf(stderr, "tensorops: TENSOROPS_KERNEL_ISA=%s: this CPU lacks it; using %s\n", env,
                 KernelIsaName(kCpuIsa));
    return kCpuIsa;
  }
  return *want;
}

KernelIsa StartupIsaOnce() {
  static const KernelIsa isa = StartupIsa();
  return isa;
}

// SetKernelIsa's override; -1: none.
std::atomic<int> g_isa_override{-1};

#if defined(__x86_64__)
__attribute__((target("avx2"), flatten)) void StreamCopyAvx2(char* d, const char* s, int64_t n) {
  StreamCopyWith<Avx2Line>(d, s, n);
}
__attribute__((flatten)) void StreamCopySse2(char* d, const char* s, int64_t n) {
  StreamCopyWith<Sse2Line>(d, s, n);
}
__attribute__((flatten)) void StreamCopyScalar(char* d, const char* s, int64_t n) {
  StreamCopyWith<ScalarLine>(d, s, n);
}
#endif

}  // namespace

int64_t StreamingStoreMinBytes() { return g_min_bytes.load(std::memory_order_relaxed); }

void SetStreamingStoreMinBytes(int64_t bytes) {
  g_min_bytes.store(bytes < 0 ? kDefaultStreamingStoreMinBytes : bytes, std::memory_order_relaxed);
}

KernelIsa CpuKernelIsa() { return kCpuIsa; }

KernelIsa ActiveKernelIsa() {
  const int o = g_isa_override.load(std::memory_order_relaxed);
  return o >= 0 ? static_cast<KernelIsa>(o) : StartupIsaOnce();
}

void SetKernelIsa(std::optional<KernelIsa> isa) {
  g_isa_override.store(isa.has_value() ? static_cast<int>(std::min(*isa, kCpuIsa)) : -1,
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

void CopyBytes(void* dst_v, const void* src_v, int64_t n, bool stream) {
  auto* dst = static_cast<char*>(dst_v);
  const auto* src = static_cast<const char*>(src_v);
#if defined(__x86_64__)
  if (stream) {
    // Our own loop at every size, not glibc's memcpy (streaming_store.h,
    // KernelIsa): the line copy is the level's, the partial lines at the
    // ends are ordinary stores.
    switch (ActiveKernelIsa()) {
      case KernelIsa::kAvx2:
        StreamCopyAvx2(dst, src, n);
        return;
      case KernelIsa::kSse2:
        StreamCopySse2(dst, src, n);
        return;
      case KernelIsa::kScalar:
        StreamCopyScalar(dst, src, n);
        return;
    }
  }
#endif
  (void)stream;
  std::memcpy(dst, src, n);
}

void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace tensorops
