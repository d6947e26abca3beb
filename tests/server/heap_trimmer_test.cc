// HeapTrimmer: trims on its interval, returns a fragmented heap's free pages
// to the OS (what --malloc_tuning keeps), starts no thread at zero.
#include "server/heap_trimmer.h"

#include <malloc.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/sanitizers.h"

namespace tensorops {
namespace {

int64_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t value = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> value) return value;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

TEST(HeapTrimmerTest, ZeroIntervalStartsNothing) {
  HeapTrimmer trimmer(absl::ZeroDuration());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(trimmer.trims(), 0);
}

TEST(HeapTrimmerTest, ReturnsFreePagesInsideTheHeap) {
  if (::tensorops::testing::kSanitized) {
    GTEST_SKIP() << "a sanitizer's allocator replaces glibc's heap";
  }
  // The server's --malloc_tuning: blocks up to 32 MiB from the heap, never
  // trimmed at its top, one arena.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
  // 64 blocks of 1 MiB, touched; all but the last freed, so the free space
  // lies below a block in use (the heap's top cannot shrink past it).
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) {
    char* p = static_cast<char*>(std::malloc(1 << 20));
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, 1 << 20);
    blocks.push_back(p);
  }
  for (int i = 0; i + 1 < 64; ++i) std::free(blocks[i]);
  const int64_t held = RssKiB();
  {
    HeapTrimmer trimmer(absl::Milliseconds(10));
    for (int i = 0; i < 500 && trimmer.trims() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(trimmer.trims(), 2);
  }  // stops and joins
  const int64_t trimmed = RssKiB();
  std::free(blocks.back());
  // 63 MiB were free inside the heap; at least 48 MiB of them went back.
  EXPECT_LE(trimmed, held - (48 << 10)) << "VmRSS " << held << " KiB -> " << trimmed << " KiB";
}

}  // namespace
}  // namespace tensorops
