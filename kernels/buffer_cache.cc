#include "kernels/buffer_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "kernels/huge_pages.h"

namespace tensorops {

struct BufferCache::Trimmer {
  std::thread thread;
};

namespace {

// Capacities are whole huge pages, so that a reused buffer is as
// THP-friendly as a new one and near sizes share capacities.
constexpr int64_t kGranule = int64_t{2} << 20;

int64_t RoundUp(int64_t bytes) {
  return (std::max<int64_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
}

char* Map(int64_t capacity) {
  void* p = mmap(nullptr, static_cast<size_t>(capacity), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  AdviseHugePages(p, capacity);
  return static_cast<char*>(p);
}

void Unmap(char* p, int64_t capacity) { munmap(p, static_cast<size_t>(capacity)); }

}  // namespace

BufferCache& BufferCache::Global() {
  static BufferCache* const cache = new BufferCache(kDefaultLimitBytes, kDefaultIdle);
  return *cache;
}

BufferCache::BufferCache(int64_t limit_bytes, absl::Duration idle)
    : limit_bytes_(limit_bytes), idle_(idle), trimmer_(std::make_unique<Trimmer>()) {}

BufferCache::~BufferCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (trimmer_->thread.joinable()) trimmer_->thread.join();
  std::lock_guard<std::mutex> lock(mu_);
  UnmapAllLocked();
}

void BufferCache::Configure(int64_t limit_bytes, absl::Duration idle) {
  std::vector<Entry> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    limit_bytes_ = std::max<int64_t>(limit_bytes, 0);
    idle_ = idle;
    while (!entries_.empty() && cached_bytes_ > limit_bytes_) {
      cached_bytes_ -= entries_.front().capacity;
      evicted.push_back(entries_.front());
      entries_.erase(entries_.begin());
    }
  }
  for (const Entry& e : evicted) Unmap(e.p, e.capacity);
}

char* BufferCache::Allocate(int64_t bytes, int64_t* capacity) {
  const int64_t need = RoundUp(bytes);
  std::vector<Entry> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int best = -1;
    for (int i = 0; i < static_cast<int>(entries_.size()); ++i) {
      const int64_t c = entries_[i].capacity;
      if (c >= need && c <= need + need / 4 && (best < 0 || c < entries_[best].capacity)) best = i;
    }
    if (best >= 0) {
      const Entry e = entries_[best];
      entries_.erase(entries_.begin() + best);
      cached_bytes_ -= e.capacity;
      ++hits_;
      *capacity = e.capacity;
      return e.p;
    }
    ++misses_;
    // Nothing fits: what is cached would only add to the new buffer's memory.
    evicted.swap(entries_);
    cached_bytes_ = 0;
  }
  for (const Entry& e : evicted) Unmap(e.p, e.capacity);
  *capacity = need;
  return Map(need);
}

void BufferCache::Release(char* p, int64_t capacity) {
  std::vector<Entry> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity > limit_bytes_ || stopping_) {
      evicted.push_back(Entry{p, capacity, absl::InfinitePast()});
    } else {
      entries_.push_back(Entry{p, capacity, absl::Now()});
      cached_bytes_ += capacity;
      while (cached_bytes_ > limit_bytes_) {
        cached_bytes_ -= entries_.front().capacity;
        evicted.push_back(entries_.front());
        entries_.erase(entries_.begin());
      }
      if (!trimmer_started_) {
        trimmer_started_ = true;
        trimmer_->thread = std::thread([this] { TrimmerLoop(); });
      }
    }
  }
  for (const Entry& e : evicted) Unmap(e.p, e.capacity);
}

void BufferCache::TrimmerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const absl::Duration tick = std::clamp(idle_ / 2, absl::Milliseconds(10), absl::Seconds(1));
    stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(tick), [this] { return stopping_; });
    if (stopping_) break;
    // Idle buffers: unmapped outside the lock (munmap of a big buffer takes
    // milliseconds; callers must not wait for it).
    const absl::Time now = absl::Now();
    std::vector<Entry> evicted;
    while (!entries_.empty() && now - entries_.front().released >= idle_) {
      cached_bytes_ -= entries_.front().capacity;
      evicted.push_back(entries_.front());
      entries_.erase(entries_.begin());
    }
    if (evicted.empty()) continue;
    lock.unlock();
    for (const Entry& e : evicted) Unmap(e.p, e.capacity);
    lock.lock();
  }
}

void BufferCache::UnmapAllLocked() {
  for (const Entry& e : entries_) Unmap(e.p, e.capacity);
  entries_.clear();
  cached_bytes_ = 0;
}

int64_t BufferCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

int64_t BufferCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t BufferCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace tensorops
