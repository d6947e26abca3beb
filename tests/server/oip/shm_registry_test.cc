// ShmRegistry: the registration rules, ownership, and that a region stays
// mapped for a holder after Unregister.
#include "server/oip/shm_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

class ShmRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = absl::StrCat("/tensorops-test-reg-", getpid());
    shm_unlink(key_.c_str());
    fd_ = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, 8192), 0);
  }
  void TearDown() override {
    close(fd_);
    shm_unlink(key_.c_str());
  }
  std::string key_;
  int fd_ = -1;
};

TEST_F(ShmRegistryTest, OffByDefault) {
  ShmRegistry shm(ShmRegistry::Options{});
  absl::Status st = shm.Register("", "r", key_, 0, 16);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), HasSubstr("--shared_memory=system"));
  EXPECT_EQ(shm.Find("", "r").status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ShmRegistryTest, RegisterChecks) {
  ShmRegistry shm({true, "/tensorops-test-", 4});
  struct Row {
    const char* what;
    std::string name, key;
    uint64_t offset, size;
    absl::StatusCode code;
    const char* message;
  };
  const Row rows[] = {
      {"empty name", "", key_, 0, 16, absl::StatusCode::kInvalidArgument, "needs a name"},
      {"relative key", "r", "tensorops-test-x", 0, 16, absl::StatusCode::kInvalidArgument,
       "is not a POSIX shared memory name"},
      {"path key", "r", "/../etc/passwd", 0, 16, absl::StatusCode::kInvalidArgument,
       "is not a POSIX shared memory name"},
      {"outside prefix", "r", "/other", 0, 16, absl::StatusCode::kPermissionDenied,
       "does not start with '/tensorops-test-'"},
      {"missing object", "r", "/tensorops-test-missing-object", 0, 16, absl::StatusCode::kNotFound,
       "no shared memory object"},
      {"zero size", "r", key_, 0, 0, absl::StatusCode::kInvalidArgument, "at least 1"},
      {"beyond the end", "r", key_, 8000, 193, absl::StatusCode::kInvalidArgument,
       "offset 8000 + byte_size 193 is beyond the end"},
      {"overflow", "r", key_, ~uint64_t{0}, 2, absl::StatusCode::kInvalidArgument, "overflows"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    absl::Status st = shm.Register("", row.name, row.key, row.offset, row.size);
    EXPECT_EQ(st.code(), row.code) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(row.message));
  }
  EXPECT_EQ(shm.size(), 0);
  ASSERT_TRUE(shm.Register("", "r", key_, 8000, 192).ok());
  EXPECT_EQ(shm.Register("", "r", key_, 0, 16).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ShmRegistryTest, OwnersAreSeparate) {
  ShmRegistry shm({true, "", 16});
  ASSERT_TRUE(shm.Register("a", "r", key_, 0, 64).ok());
  ASSERT_TRUE(shm.Register("b", "r", key_, 64, 64).ok());  // same name, other owner
  EXPECT_EQ((*shm.Find("b", "r"))->offset(), 64u);
  EXPECT_EQ(shm.Find("c", "r").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(shm.Unregister("c", "r").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(shm.List("a", "")->size(), 1u);
  ASSERT_TRUE(shm.Unregister("a", "").ok());  // all of a's
  EXPECT_EQ(shm.size(), 1);
  EXPECT_TRUE(shm.Find("b", "r").ok());
}

TEST_F(ShmRegistryTest, HolderKeepsTheMappingAfterUnregister) {
  ShmRegistry shm({true, "", 16});
  ASSERT_TRUE(shm.Register("", "r", key_, 100, 1000).ok());
  std::shared_ptr<const ShmRegion> held = *shm.Find("", "r");
  ASSERT_TRUE(shm.Unregister("", "r").ok());
  EXPECT_EQ(shm.Find("", "r").status().code(), absl::StatusCode::kNotFound);
  // Still mapped: write through it and read it back through our own fd.
  char* p = *held->Bytes(0, 4, "t");
  std::memcpy(p, "abcd", 4);
  char back[4];
  ASSERT_EQ(pread(fd_, back, 4, 100), 4);
  EXPECT_EQ(std::string(back, 4), "abcd");
  EXPECT_THAT(std::string(held->Bytes(999, 2, "input 'x'").status().message()),
              HasSubstr("input 'x': shared memory region 'r' holds 1000 bytes"));
}

}  // namespace
}  // namespace tensorops
