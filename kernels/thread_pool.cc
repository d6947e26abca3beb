#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace tensorops {

ThreadPool::ThreadPool(int num_threads) {
  const int n = std::max(1, num_threads);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  work_.notify_one();
}

int64_t ThreadPool::queue_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int64_t total, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = std::min<int64_t>(num_threads(), (total + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, total);
    return;
  }
  // Chunks are claimed from a shared counter by the caller and by helper
  // tasks alike. The caller keeps claiming until none are left, so it never
  // waits on a helper that has not started (which could deadlock when every
  // worker sits in a ParallelFor); a helper that starts late finds nothing to
  // claim and only touches the shared state, never `fn`.
  struct State {
    std::atomic<int64_t> next{0};
    std::mutex mu;
    std::condition_variable all_done;
    int64_t done = 0;  // guarded by mu
  };
  auto state = std::make_shared<State>();
  auto work = [state, total, chunks, &fn] {
    int64_t finished = 0;
    for (int64_t i; (i = state->next.fetch_add(1)) < chunks;) {
      fn(total * i / chunks, total * (i + 1) / chunks);
      ++finished;
    }
    if (finished > 0) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->done += finished;
      // Under the lock: the caller may return (and `state` lose its last
      // other owner) as soon as it sees the count.
      state->all_done.notify_all();
    }
  };
  {
    // Helpers go to the front: they finish a request already under way.
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = 1; i < chunks; ++i) queue_.push_front(work);
  }
  work_.notify_all();
  work();
  std::unique_lock<std::mutex> lock(state->mu);
  state->all_done.wait(lock, [&] { return state->done == chunks; });
}

}  // namespace tensorops
