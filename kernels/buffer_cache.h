// Big tensor buffers kept for the next call to reuse.
//
// The first touch of fresh memory is the costliest thing a big call does on
// this kind of VM: a new buffer is written at 1-1.3 GB/s with 4 KiB pages
// and 0.3-7 GB/s with huge pages (0.3 when the kernel compacts memory to
// find them), against 17-20 GB/s for a buffer written before
// (../shared/perf-notes.md; bench: a 1 GiB ExecuteStream spent ~80% of the
// server's CPU zeroing new pages). glibc returns every buffer this big to
// the kernel on free, so each call paid it again. This cache keeps freed
// buffers of kMinBytes and more, up to a byte limit and for a short time,
// and hands them to the next allocation of about the same size.
//
// Policy, so that caching never raises the process's peak memory:
//   - a hit is a cached buffer of capacity [need, need + need/4] (capacities
//     are multiples of 2 MiB); the smallest such is taken;
//   - a miss first unmaps every cached buffer, then maps a new one;
//   - a freed buffer larger than the limit is unmapped, else cached; the
//     oldest are unmapped while the cache holds more than the limit;
//   - buffers idle for longer than the idle time are unmapped by a
//     background thread (started with the first cached buffer).
//
// Thread-safety: all members are thread-safe.
//
// Example:
//   BufferCache& cache = BufferCache::Global();
//   int64_t capacity = 0;
//   char* p = cache.Allocate(bytes, &capacity);
//   ... use p[0, bytes) ...
//   cache.Release(p, capacity);
#ifndef TENSOROPS_KERNELS_BUFFER_CACHE_H_
#define TENSOROPS_KERNELS_BUFFER_CACHE_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace tensorops {

class BufferCache {
 public:
  // Buffers below this come from the heap and bypass the cache.
  static constexpr int64_t kMinBytes = int64_t{8} << 20;
  static constexpr int64_t kDefaultLimitBytes = int64_t{2} << 30;
  static constexpr absl::Duration kDefaultIdle = absl::Seconds(10);

  // The process's cache (never destroyed).
  static BufferCache& Global();

  BufferCache(int64_t limit_bytes, absl::Duration idle);
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // At most `limit_bytes` cached (0 turns caching off and empties it), each
  // for at most `idle`.
  void Configure(int64_t limit_bytes, absl::Duration idle);

  // A buffer of at least `bytes` (>= kMinBytes), uninitialised, with huge
  // pages advised when new; `*capacity` receives its size for Release.
  // Aborts like operator new when memory is exhausted (std::bad_alloc).
  char* Allocate(int64_t bytes, int64_t* capacity);
  // Gives back a buffer from Allocate.
  void Release(char* p, int64_t capacity);

  // Counters, for tests and metrics.
  int64_t cached_bytes() const;
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    char* p;
    int64_t capacity;
    absl::Time released;
  };

  void UnmapAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimmerLoop();

  // std::mutex, not absl::Mutex: ThreadSanitizer cannot see Debian's
  // uninstrumented Abseil, and the trimmer thread meets every call's
  // Release (as ThreadPool and AdmissionController do, docs/development.md).
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;  // the trimmer's wait; notified on stopping_
  int64_t limit_bytes_ ABSL_GUARDED_BY(mu_);
  absl::Duration idle_ ABSL_GUARDED_BY(mu_);
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool trimmer_started_ ABSL_GUARDED_BY(mu_) = false;
  struct Trimmer;
  std::unique_ptr<Trimmer> trimmer_;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_BUFFER_CACHE_H_
