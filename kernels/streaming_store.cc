#include "kernels/streaming_store.h"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace tensorops {
namespace {

std::atomic<int64_t> g_min_bytes{kDefaultStreamingStoreMinBytes};

#if defined(__x86_64__)
const bool kCpuHasAvx2 = __builtin_cpu_supports("avx2");
#else
const bool kCpuHasAvx2 = false;
#endif
std::atomic<bool> g_avx2_allowed{true};

// Below this a streamed copy is mostly unaligned head and tail, and a partly
// written line sitting in a write-combining buffer costs more than the read
// for ownership it saves.
constexpr int64_t kMinStreamBytes = 512;

}  // namespace

int64_t StreamingStoreMinBytes() { return g_min_bytes.load(std::memory_order_relaxed); }

void SetStreamingStoreMinBytes(int64_t bytes) {
  g_min_bytes.store(bytes < 0 ? kDefaultStreamingStoreMinBytes : bytes, std::memory_order_relaxed);
}

bool UseAvx2() { return kCpuHasAvx2 && g_avx2_allowed.load(std::memory_order_relaxed); }

void SetAvx2Allowed(bool allowed) { g_avx2_allowed.store(allowed, std::memory_order_relaxed); }

void CopyBytes(void* dst_v, const void* src_v, int64_t n, bool stream) {
  auto* dst = static_cast<char*>(dst_v);
  const auto* src = static_cast<const char*>(src_v);
#if defined(__x86_64__)
  if (stream && n >= kMinStreamBytes) {
    // Ordinary stores up to the first 64-byte boundary of dst, then whole
    // lines with SSE2 streaming stores (baseline x86-64, and the copy is
    // bound by DRAM, not by the vector width), then the tail.
    const int64_t head = (64 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63)) & 63;
    std::memcpy(dst, src, head);
    int64_t i = head;
    for (; i + 64 <= n; i += 64) Sse2Line::Copy(dst + i, src + i);
    std::memcpy(dst + i, src + i, n - i);
    return;
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
