// A POSIX shared-memory object owned by one test (created, mapped, unlinked
// at the end), and the Open Inference Protocol's three shared-memory
// parameters of a tensor.
//
// Example:
//   ShmObject obj(1 << 20);  // key "/tensorops-test-<pid>-<n>"
//   ... register obj.key() with the server, write obj.data() ...
//   SetShmParams(request.mutable_inputs(0)->mutable_parameters(), "r", 0, 4096);
#ifndef TENSOROPS_TESTS_HARNESS_SHM_OBJECT_H_
#define TENSOROPS_TESTS_HARNESS_SHM_OBJECT_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tensorops::testing {

class ShmObject {
 public:
  // `size` bytes under `key` (a stale object of that name is removed first);
  // an empty key picks "/tensorops-test-<pid>-<n>", unique in the process.
  explicit ShmObject(size_t size, std::string key = "")
      : key_(key.empty() ? absl::StrCat("/tensorops-test-", getpid(), "-", counter_++)
                         : std::move(key)),
        size_(size) {
    shm_unlink(key_.c_str());
    fd_ = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd_, 0) << key_;
    EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0);
    map_ = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    EXPECT_NE(map_, MAP_FAILED);
  }
  ~ShmObject() {
    if (map_ != MAP_FAILED) munmap(map_, size_);
    if (fd_ >= 0) close(fd_);
    shm_unlink(key_.c_str());
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  const std::string& key() const { return key_; }
  char* data() { return map_; }
  // Shrinks (or grows) the object under the mapping: reads past the new end
  // fault with SIGBUS, which is what the server must survive.
  void Truncate(size_t size) { EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0); }

 private:
  static inline std::atomic<int> counter_{0};
  std::string key_;
  size_t size_;
  int fd_ = -1;
  char* map_ = static_cast<char*>(MAP_FAILED);
};

// The OIP parameters that put a tensor (input or requested output) in a
// registered region: `params` is its parameters map.
template <typename Params>
void SetShmParams(Params* params, const std::string& region, int64_t offset, int64_t size) {
  (*params)["shared_memory_region"].set_string_param(region);
  (*params)["shared_memory_offset"].set_int64_param(offset);
  (*params)["shared_memory_byte_size"].set_int64_param(size);
}

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_SHM_OBJECT_H_
