// kernels/buffer_cache.h: reuse of near sizes, the miss that empties the
// cache, the byte limit, idle trimming, Tensor's use of the global cache,
// and many threads allocating and freeing at once (also run under TSan).
#include "kernels/buffer_cache.h"

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/tensor.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(BufferCacheTest, ReusesABufferOfAboutTheSameSize) {
  BufferCache cache(int64_t{1} << 30, absl::Seconds(60));
  int64_t cap = 0;
  char* p = cache.Allocate(100 * kMiB, &cap);
  EXPECT_EQ(cap, 100 * kMiB);  // whole 2 MiB pages
  std::memset(p, 7, 100 * kMiB);
  cache.Release(p, cap);
  EXPECT_EQ(cache.cached_bytes(), 100 * kMiB);

  int64_t cap2 = 0;
  char* q = cache.Allocate(90 * kMiB + 1, &cap2);  // within need + need/4
  EXPECT_EQ(q, p);
  EXPECT_EQ(cap2, cap);
  EXPECT_EQ(q[100 * kMiB - 1], 7);  // the same pages, still written
  EXPECT_EQ(cache.cached_bytes(), 0);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  cache.Release(q, cap2);
}

TEST(BufferCacheTest, AMissEmptiesTheCacheFirst) {
  BufferCache cache(int64_t{1} << 30, absl::Seconds(60));
  int64_t a = 0, b = 0;
  char* p = cache.Allocate(64 * kMiB, &a);
  char* q = cache.Allocate(10 * kMiB, &b);
  cache.Release(p, a);
  cache.Release(q, b);
  EXPECT_EQ(cache.cached_bytes(), 64 * kMiB + 10 * kMiB);
  // 40 MiB: 64 is too big (> 40 + 10), 10 too small: a miss, and both go.
  int64_t c = 0;
  char* r = cache.Allocate(40 * kMiB, &c);
  EXPECT_EQ(cache.cached_bytes(), 0);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.misses(), 3);
  cache.Release(r, c);
}

TEST(BufferCacheTest, KeepsAtMostTheLimitDroppingTheOldest) {
  BufferCache cache(50 * kMiB, absl::Seconds(60));
  int64_t a = 0, b = 0, c = 0, d = 0;
  char* p = cache.Allocate(20 * kMiB, &a);
  char* q = cache.Allocate(20 * kMiB, &b);
  char* r = cache.Allocate(20 * kMiB, &c);
  char* big = cache.Allocate(60 * kMiB, &d);
  cache.Release(big, d);  // bigger than the limit: never cached
  EXPECT_EQ(cache.cached_bytes(), 0);
  cache.Release(p, a);
  cache.Release(q, b);
  cache.Release(r, c);  // 60 MiB > 50: the oldest (p) goes
  EXPECT_EQ(cache.cached_bytes(), 40 * kMiB);
  int64_t e = 0;
  char* s = cache.Allocate(20 * kMiB, &e);
  EXPECT_TRUE(s == q || s == r);
  cache.Release(s, e);
  cache.Configure(0, absl::Seconds(60));  // off: everything goes
  EXPECT_EQ(cache.cached_bytes(), 0);
  int64_t f = 0;
  char* t = cache.Allocate(20 * kMiB, &f);
  cache.Release(t, f);
  EXPECT_EQ(cache.cached_bytes(), 0);
}

TEST(BufferCacheTest, IdleBuffersGoBackToTheOs) {
  BufferCache cache(int64_t{1} << 30, absl::Milliseconds(100));
  int64_t cap = 0;
  char* p = cache.Allocate(16 * kMiB, &cap);
  cache.Release(p, cap);
  EXPECT_EQ(cache.cached_bytes(), 16 * kMiB);
  for (int i = 0; i < 200 && cache.cached_bytes() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(cache.cached_bytes(), 0);
}

TEST(BufferCacheTest, BigTensorsUseTheGlobalCache) {
  BufferCache& cache = BufferCache::Global();
  const int64_t hits = cache.hits();
  const void* first = nullptr;
  {
    Tensor t(DType::kUInt8, Shape{24 * kMiB});
    first = t.data();
    static_cast<char*>(t.mutable_data())[24 * kMiB - 1] = 1;
  }
  Tensor again(DType::kFloat32, Shape{6 * kMiB});  // the same 24 MiB
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(cache.hits(), hits + 1);
  Tensor small(DType::kUInt8, Shape{1024});  // from the heap
  EXPECT_NE(small.data(), nullptr);
}

TEST(BufferCacheTest, ManyThreadsAllocateAndFree) {
  BufferCache cache(96 * kMiB, absl::Milliseconds(20));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      std::mt19937 rng(::tensorops::testing::TestSeed(t));
      for (int i = 0; i < 60; ++i) {
        const int64_t bytes = (8 + rng() % 24) * kMiB + rng() % 4096;
        int64_t cap = 0;
        char* p = cache.Allocate(bytes, &cap);
        ASSERT_GE(cap, bytes);
        const char mark = static_cast<char>(t * 16 + i);
        p[0] = mark;
        p[bytes / 2] = mark;
        p[bytes - 1] = mark;
        std::this_thread::yield();
        EXPECT_EQ(p[0], mark);
        EXPECT_EQ(p[bytes / 2], mark);
        EXPECT_EQ(p[bytes - 1], mark);
        cache.Release(p, cap);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.cached_bytes(), 96 * kMiB);
}

}  // namespace
}  // namespace tensorops
