// server/fd_budget.h: the caps derived from a descriptor limit, and raising
// the soft limit to the hard one.
#include "server/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>

#include "gtest/gtest.h"

namespace tensorops {
namespace {

TEST(FdBudgetTest, SplitsWhatTheReserveLeaves) {
  const FdBudget b4096 = FdBudgetFor(4096);
  EXPECT_EQ(b4096.reserve, 512);
  EXPECT_EQ(b4096.grpc_max_connections, 1792);
  EXPECT_EQ(b4096.http_max_connections, 1792);
  // Small limits keep the 64-descriptor floor of the reserve.
  const FdBudget b300 = FdBudgetFor(300);
  EXPECT_EQ(b300.reserve, 64);
  EXPECT_EQ(b300.grpc_max_connections, 118);
  EXPECT_EQ(b300.http_max_connections, 118);
  // Never a cap of zero: a door that serves nobody looks like a dead one.
  const FdBudget b10 = FdBudgetFor(10);
  EXPECT_EQ(b10.grpc_max_connections, 1);
  EXPECT_EQ(b10.http_max_connections, 1);
  for (int64_t limit : {int64_t{64}, int64_t{1024}, int64_t{65536}, kMaxFdLimit}) {
    const FdBudget b = FdBudgetFor(limit);
    EXPECT_LE(b.reserve + b.grpc_max_connections + b.http_max_connections,
              std::max<int64_t>(limit, b.reserve + 2))
        << limit;
  }
}

TEST(FdBudgetTest, RaisesTheSoftLimitToTheHardOne) {
  struct rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  // Lower the soft limit (always allowed), then raise it back.
  struct rlimit lowered = before;
  lowered.rlim_cur = 256;
  if (before.rlim_max != RLIM_INFINITY && before.rlim_max < 256) GTEST_SKIP() << "hard limit < 256";
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  EXPECT_EQ(CurrentFdLimit(), 256);
  absl::StatusOr<FdLimit> limit = RaiseFdLimit();
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->was, 256);
  const int64_t hard =
      before.rlim_max == RLIM_INFINITY ? kMaxFdLimit : static_cast<int64_t>(before.rlim_max);
  EXPECT_EQ(limit->hard, hard);
  EXPECT_EQ(limit->soft, std::min(hard, kMaxFdLimit));
  struct rlimit now;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(static_cast<int64_t>(now.rlim_cur), limit->soft);
  EXPECT_EQ(CurrentFdLimit(), limit->soft);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
}  // namespace tensorops
