#include "kernels/thread_pool.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"

namespace tensorops {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t total : {0, 1, 2, 7, 100, 1001}) {
    for (int64_t grain : {1, 3, 50, 5000}) {
      SCOPED_TRACE(testing::Message() << "total " << total << " grain " << grain);
      std::vector<std::atomic<int>> hits(total);
      pool.ParallelFor(total, grain, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LE(b, e);
        ASSERT_LE(e, total);
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < total; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
    }
  }
}

TEST(ThreadPoolTest, ParallelForFromEveryWorkerAtOnceDoesNotDeadlock) {
  // Every worker sits in a ParallelFor whose helpers queue behind the other
  // workers' tasks: the callers must do the work themselves.
  ThreadPool pool(2);
  constexpr int kTasks = 8;
  absl::BlockingCounter done(kTasks);
  std::atomic<int64_t> sum{0};
  for (int t = 0; t < kTasks; ++t) {
    pool.Schedule([&] {
      pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(sum.load(), kTasks * 1000);
}

TEST(ThreadPoolTest, DestructorRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace tensorops
