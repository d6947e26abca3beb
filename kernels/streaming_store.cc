#include "kernels/streaming_store.h"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace tensorops {
namespace {

std::atomic<int64_t> g_min_bytes{kDefaultStreamingStoreMinBytes};

#if defined(__x86_64__)
// CopyBytes with stream = true on one instruction set.
struct StreamCopy {
  template <typename Isa>
  static void Run(char* d, const char* s, int64_t n) {
    StreamCopyWith<LineOf<Isa>>(d, s, n);
  }
};
#endif

}  // namespace

int64_t StreamingStoreMinBytes() { return g_min_bytes.load(std::memory_order_relaxed); }

void SetStreamingStoreMinBytes(int64_t bytes) {
  g_min_bytes.store(bytes < 0 ? kDefaultStreamingStoreMinBytes : bytes, std::memory_order_relaxed);
}

void CopyBytes(void* dst_v, const void* src_v, int64_t n, bool stream) {
  auto* dst = static_cast<char*>(dst_v);
  const auto* src = static_cast<const char*>(src_v);
#if defined(__x86_64__)
  if (stream) {
    // Our own loop at every size, not glibc's memcpy (streaming_store.h,
    // KernelIsa): the line copy is the level's, the partial lines at the
    // ends are ordinary stores.
    IsaDispatch<StreamCopy>::Run(dst, src, n);
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
