// The memory the server may use, and the budgets it derives from it.
//
// A server in a container is OOM-killed when it passes the container's
// memory limit, whatever --max_inflight_bytes says, so by default the
// server sizes its budgets from the limit it runs under: the cgroup's
// (v2 memory.max, v1 memory.limit_in_bytes, the smallest along the path to
// the root), else the machine's (/proc/meminfo MemTotal).
//
// Example:
//   absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit();
//   MemoryBudget budget = BudgetFor(limit->bytes);
//
// Thread-safety: plain functions of their arguments (and of files read).
#ifndef TENSOROPS_SERVER_MEMORY_LIMIT_H_
#define TENSOROPS_SERVER_MEMORY_LIMIT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorops {

struct MemoryLimit {
  int64_t bytes = 0;
  // Where the limit came from, for the start-up log line: e.g.
  // "cgroup v2 /sys/fs/cgroup/memory.max" or "/proc/meminfo MemTotal".
  std::string source;
};

// The server's memory budgets for a limit of `limit_bytes`. The fractions
// leave room for what admission does not count (see BudgetFor).
struct MemoryBudget {
  int64_t max_inflight_bytes = 0;  // admission (--max_inflight_bytes)
  int64_t buffer_cache_bytes = 0;  // --buffer_cache_bytes
  int64_t grpc_memory_bytes = 0;   // gRPC's ResourceQuota (--grpc_memory_bytes)
};

// A cgroup limit file's contents: a byte count, or nullopt for "max"
// (v2), v1's "no limit" (a value of 2^62 or more, e.g. 9223372036854771712)
// or anything that is not a number.
std::optional<int64_t> ParseCgroupLimit(absl::string_view text);
// MemTotal of a /proc/meminfo text, in bytes; nullopt when missing.
std::optional<int64_t> ParseMemTotal(absl::string_view meminfo);

// The limit this process runs under. `root` prefixes every path read
// ("/proc/self/cgroup", "/sys/fs/cgroup/...", "/proc/meminfo"), for tests.
// The cgroup's limit wins when it is below the machine's memory. An error
// only when not even /proc/meminfo can be read.
absl::StatusOr<MemoryLimit> DetectMemoryLimit(const std::string& root = "");

// 40% for admitted calls (an Execute call holds about 1.5x what admission
// counts at its peak: request, response and the serialised response), 20%
// for what gRPC buffers before admission, 10% (at most 2 GiB, the cache's
// default) for the buffer cache; the rest is the process itself and slack.
MemoryBudget BudgetFor(int64_t limit_bytes);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_MEMORY_LIMIT_H_
