#include "server/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tensorops {

absl::StatusOr<FdLimit> RaiseFdLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  FdLimit limit;
  limit.was = rl.rlim_cur == RLIM_INFINITY ? kMaxFdLimit : static_cast<int64_t>(rl.rlim_cur);
  limit.hard = rl.rlim_max == RLIM_INFINITY ? kMaxFdLimit : static_cast<int64_t>(rl.rlim_max);
  limit.soft = limit.was;
  const int64_t want = std::min(limit.hard, kMaxFdLimit);
  if (want > limit.soft) {
    rl.rlim_cur = static_cast<rlim_t>(want);
    // A failure (a seccomp profile, say) keeps the old limit: the caps are
    // then derived from what the process really has.
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) limit.soft = want;
  }
  return limit;
}

int64_t CurrentFdLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxFdLimit;
  return std::min(static_cast<int64_t>(rl.rlim_cur), kMaxFdLimit);
}

FdBudget FdBudgetFor(int64_t fd_limit) {
  FdBudget budget;
  budget.reserve = std::max<int64_t>(64, fd_limit / 8);
  const int64_t connections = std::max<int64_t>(0, fd_limit - budget.reserve);
  // At least one connection a door, so a tiny limit still serves someone.
  budget.grpc_max_connections = std::max<int64_t>(1, connections / 2);
  budget.http_max_connections = std::max<int64_t>(1, connections / 2);
  return budget;
}

}  // namespace tensorops
