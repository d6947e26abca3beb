// The kernel thread pool: a fixed set of workers running queued tasks, and
// ParallelFor to split one large job across them.
//
// Thread-safety: all methods are safe to call from any thread, including
// from inside a task (ParallelFor from a worker runs part of the work on the
// calling thread, so it never deadlocks waiting on itself).
#ifndef TENSOROPS_KERNELS_THREAD_POOL_H_
#define TENSOROPS_KERNELS_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
  void ParallelFor(int64_t total, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& fn);

  int num_threads() const { return static_cast<int>(workers_.size()); }
  // Tasks queued but not yet started.
  int64_t queue_size() const;

 private:
  void WorkerLoop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_THREAD_POOL_H_
