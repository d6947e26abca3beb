// The kernel thread pool: a fixed set of workers running queued tasks, and
// ParallelFor to split one large job across them.
//
// Thread-safety: all methods are safe to call from any thread, including
// from inside a task (ParallelFor from a worker runs part of the work on the
// calling thread, so it never deadlocks waiting on itself).
#ifndef TENSOROPS_KERNELS_THREAD_POOL_H_
#define TENSOROPS_KERNELS_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tensorops {

class ThreadPool {
 public:
  // `num_threads` >= 1 workers.
  explicit ThreadPool(int num_threads);
  // Runs every task already queued, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on a worker. Never blocks; the queue is unbounded
  // here: admission control above the pool bounds it.
  void Schedule(std::function<void()> task);

  // Calls fn(begin, end) over disjoint ranges covering [0, total), each of
  // about `grain` or more units, on up to num_threads() threads (the caller
  // included); returns when all are done. Runs inline when one range suffices.
  void ParallelFor(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  int num_threads() const { return static_cast<int>(workers_.size()); }
  // Tasks queued but not yet started.
  int64_t queue_size() const;

 private:
  void WorkerLoop();

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees pthread
  // mutexes, but not the futex-based absl::Mutex of Debian's uninstrumented
  // Abseil (CI runs the concurrency tests under TSan).
  mutable std::mutex mu_;
  std::condition_variable work_;             // a task was queued, or stopping_
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_THREAD_POOL_H_
