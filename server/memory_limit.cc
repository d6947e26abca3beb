#include "server/memory_limit.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/buffer_cache.h"

namespace tensorops {
namespace {

// cgroup v1 reports "no limit" as the largest page-aligned int64.
constexpr int64_t kUnlimitedFrom = int64_t{1} << 62;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The smallest limit in `file` from `dir`'s cgroup up to the hierarchy's
// mount point `mount` (a parent's limit binds its children). `cgroup_path`
// is the process's path from /proc/self/cgroup; a path not visible under
// the mount (a cgroup namespace shows the own cgroup as the root) just
// finds the mount's own file.
std::optional<int64_t> SmallestLimitUp(const std::string& mount, std::string cgroup_path,
                                       const std::string& file, std::string* found_in) {
  std::optional<int64_t> best;
  while (true) {
    const std::string path = absl::StrCat(mount, cgroup_path == "/" ? "" : cgroup_path, "/", file);
    if (std::optional<std::string> text = ReadFile(path)) {
      if (std::optional<int64_t> v = ParseCgroupLimit(*text); v && (!best || *v < *best)) {
        best = v;
        *found_in = path;
      }
    }
    if (cgroup_path.empty() || cgroup_path == "/") break;
    const size_t slash = cgroup_path.rfind('/');
    cgroup_path = slash == 0 || slash == std::string::npos ? "/" : cgroup_path.substr(0, slash);
  }
  return best;
}

}  // namespace

std::optional<int64_t> ParseCgroupLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v <= 0 || v >= kUnlimitedFrom) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseMemTotal(absl::string_view meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib <= 0) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

absl::StatusOr<MemoryLimit> DetectMemoryLimit(const std::string& root) {
  MemoryLimit limit;
  const std::optional<std::string> meminfo = ReadFile(root + "/proc/meminfo");
  const std::optional<int64_t> total = meminfo ? ParseMemTotal(*meminfo) : std::nullopt;
  if (!total) {
    return absl::UnavailableError(
        absl::StrCat("cannot read MemTotal from ", root, "/proc/meminfo"));
  }
  limit.bytes = *total;
  limit.source = "/proc/meminfo MemTotal";
  // /proc/self/cgroup: "0::/path" for v2, "N:memory[,...]:/path" for v1.
  const std::string cgroups = ReadFile(root + "/proc/self/cgroup").value_or("0::/\n");
  for (absl::string_view line : absl::StrSplit(cgroups, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    std::string found_in;
    std::optional<int64_t> v;
    std::string kind;
    if (parts[0] == "0" && parts[1].empty()) {
      v = SmallestLimitUp(root + "/sys/fs/cgroup", parts[2], "memory.max", &found_in);
      kind = "cgroup v2 ";
    } else if (absl::c_linear_search(std::vector<std::string>(absl::StrSplit(parts[1], ',')),
                                     "memory")) {
      v = SmallestLimitUp(root + "/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes",
                          &found_in);
      kind = "cgroup v1 ";
    }
    if (v && *v < limit.bytes) {
      limit.bytes = *v;
      limit.source = kind + found_in.substr(root.size());
    }
  }
  return limit;
}

MemoryBudget BudgetFor(int64_t limit_bytes) {
  MemoryBudget budget;
  budget.max_inflight_bytes = limit_bytes / 10 * 4;
  budget.grpc_memory_bytes = limit_bytes / 10 * 2;
  budget.buffer_cache_bytes = std::min(limit_bytes / 10, BufferCache::kDefaultLimitBytes);
  return budget;
}

}  // namespace tensorops
