// server/memory_limit.h: parsing cgroup and /proc files, finding the limit
// in a fake root (cgroup v2, v1, none), and the budgets derived from it.
#include "server/memory_limit.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tensorops {
namespace {

TEST(MemoryLimitTest, ParsesCgroupLimitFiles) {
  struct Row {
    const char* text;
    std::optional<int64_t> want;
  };
  const Row rows[] = {
      {"1073741824\n", 1073741824},
      {"max\n", std::nullopt},
      {"9223372036854771712\n", std::nullopt},  // v1's "no limit"
      {"", std::nullopt},
      {"-1\n", std::nullopt},
      {"12x\n", std::nullopt},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.text);
    EXPECT_EQ(ParseCgroupLimit(row.text), row.want);
  }
}

TEST(MemoryLimitTest, ParsesMemTotal) {
  EXPECT_EQ(ParseMemTotal("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            int64_t{24576000} * 1024);
  EXPECT_EQ(ParseMemTotal("MemFree: 1 kB\n"), std::nullopt);
}

// A fake root with /proc/meminfo (16 GiB) and /proc/self/cgroup.
class FakeRoot {
 public:
  FakeRoot() {
    char tmpl[] = "/tmp/memory_limit_test.XXXXXX";
    root_ = mkdtemp(tmpl);
    Write("/proc/meminfo", "MemTotal:       16777216 kB\n");
  }
  ~FakeRoot() { std::system(("rm -rf " + root_).c_str()); }
  void Write(const std::string& path, const std::string& text) {
    std::system(("mkdir -p $(dirname " + root_ + path + ")").c_str());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(MemoryLimitTest, NoCgroupLimitMeansMemTotal) {
  FakeRoot fake;
  fake.Write("/proc/self/cgroup", "0::/\n");
  fake.Write("/sys/fs/cgroup/memory.max", "max\n");
  absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(fake.root());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, int64_t{16} << 30);
  EXPECT_EQ(limit->source, "/proc/meminfo MemTotal");
}

TEST(MemoryLimitTest, CgroupV2LimitAlongThePath) {
  FakeRoot fake;
  fake.Write("/proc/self/cgroup", "0::/a/b\n");
  fake.Write("/sys/fs/cgroup/a/b/memory.max", "max\n");
  fake.Write("/sys/fs/cgroup/a/memory.max", "1073741824\n");  // the parent binds
  absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(fake.root());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, int64_t{1} << 30);
  EXPECT_EQ(limit->source, "cgroup v2 /sys/fs/cgroup/a/memory.max");
}

TEST(MemoryLimitTest, CgroupV2InANamespaceReadsTheMountRoot) {
  FakeRoot fake;
  // A container's cgroup namespace: its own cgroup is "/".
  fake.Write("/proc/self/cgroup", "0::/\n");
  fake.Write("/sys/fs/cgroup/memory.max", "536870912\n");
  absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(fake.root());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, int64_t{512} << 20);
}

TEST(MemoryLimitTest, CgroupV1Limit) {
  FakeRoot fake;
  fake.Write("/proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/job/7\n0::/\n");
  fake.Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  fake.Write("/sys/fs/cgroup/memory/job/7/memory.limit_in_bytes", "2147483648\n");
  absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(fake.root());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, int64_t{2} << 30);
  EXPECT_EQ(limit->source, "cgroup v1 /sys/fs/cgroup/memory/job/7/memory.limit_in_bytes");
}

TEST(MemoryLimitTest, CgroupLimitAboveTheMachineIsTheMachine) {
  FakeRoot fake;
  fake.Write("/proc/self/cgroup", "0::/\n");
  fake.Write("/sys/fs/cgroup/memory.max", "68719476736\n");  // 64 GiB
  absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(fake.root());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, int64_t{16} << 30);
}

TEST(MemoryLimitTest, NoMeminfoIsAnError) {
  EXPECT_FALSE(DetectMemoryLimit("/nonexistent-root").ok());
}

TEST(MemoryLimitTest, Budgets) {
  const MemoryBudget one_gib = BudgetFor(int64_t{1} << 30);
  EXPECT_EQ(one_gib.max_inflight_bytes, (int64_t{1} << 30) / 10 * 4);
  EXPECT_EQ(one_gib.grpc_memory_bytes, (int64_t{1} << 30) / 10 * 2);
  EXPECT_EQ(one_gib.buffer_cache_bytes, (int64_t{1} << 30) / 10);
  // The cache stays at its 2 GiB default on big machines.
  EXPECT_EQ(BudgetFor(int64_t{64} << 30).buffer_cache_bytes, int64_t{2} << 30);
}

}  // namespace
}  // namespace tensorops
