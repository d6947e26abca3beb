// System shared memory for co-located callers (the Open Inference Protocol's
// `system_shared_memory` extension): a client creates a POSIX shared-memory
// object, registers (name, key, offset, byte_size), then names the region in
// a tensor's parameters instead of sending the tensor's bytes.
//
// Safety rules (README "Shared memory"):
//  - off unless enabled (--shared_memory=system): a network caller must not
//    make the server map objects of its host;
//  - keys must be plain shm_open names ("/name", no other '/'), and start with
//    the configured prefix when one is set;
//  - Register opens the object, checks that offset + byte_size fits, and maps
//    the region once; every use checks a tensor's range against the region;
//  - regions are reference-counted: Unregister removes the name at once, but a
//    call that found the region keeps its mapping until it finishes;
//  - before each use the object's size is checked again (fstat), so a caller
//    that shrank its object gets a clear error; the copy itself runs under
//    RunCatchingSigbus (server/sigbus_guard.h) for the remaining race;
//  - a region belongs to its owner (the caller's bearer token; "" without
//    tokens): other owners neither see nor use nor unregister it.
//
// Thread-safety: ShmRegistry's methods are safe from any thread; a ShmRegion
// is immutable and safe to share.
#ifndef TENSOROPS_SERVER_OIP_SHM_REGISTRY_H_
#define TENSOROPS_SERVER_OIP_SHM_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorops {

// One registered, mapped region. Unmapped and closed when the last reference goes.
class ShmRegion {
 public:
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }

  // The checked view of a tensor's bytes: [offset, offset + size) inside the
  // region. INVALID_ARGUMENT naming the region (and `what`, e.g. "input
  // 'data'") when the range does not fit the region, or when the object has
  // been shrunk below the registered region since (fstat, now).
  absl::StatusOr<char*> Bytes(uint64_t offset, uint64_t size, absl::string_view what) const;

  // Whether [a_off, a_off + a_size) of this region and [b_off, b_off +
  // b_size) of `other` share bytes of the same object (also through two
  // registrations of one object), so a kernel would read what it writes.
  bool Overlaps(uint64_t a_off, uint64_t a_size, const ShmRegion& other, uint64_t b_off,
                uint64_t b_size) const;

 private:
  friend class ShmRegistry;
  ShmRegion() = default;

  std::string name_;
  std::string key_;
  uint64_t offset_ = 0;
  uint64_t byte_size_ = 0;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  void* map_ = nullptr;  // page-aligned start of the mapping
  size_t map_length_ = 0;
  char* base_ = nullptr;  // the region's first byte (map_ + offset % page)
};

class ShmRegistry {
 public:
  struct Options {
    bool enabled = false;        // --shared_memory=system
    std::string key_prefix;      // --shared_memory_key_prefix; empty: any key
    int64_t max_regions = 1024;  // per server, so registrations cannot pile up without end
  };
  explicit ShmRegistry(Options options) : options_(std::move(options)) {}

  bool enabled() const { return options_.enabled; }

  // UNAVAILABLE when disabled; INVALID_ARGUMENT for an empty name, a bad key,
  // byte_size 0 or offset + byte_size beyond the object; PERMISSION_DENIED
  // for a key outside the prefix; NOT_FOUND when no such object exists;
  // ALREADY_EXISTS when `owner` already has a region of that name.
  absl::Status Register(const std::string& owner, const std::string& name, const std::string& key,
                        uint64_t offset, uint64_t byte_size);
  // Removes `owner`'s region `name` (empty: all of owner's). NOT_FOUND for an
  // unknown name. Calls using it keep it mapped until they finish.
  absl::Status Unregister(const std::string& owner, const std::string& name);
  // `owner`'s region `name`: NOT_FOUND naming it when there is none.
  absl::StatusOr<std::shared_ptr<const ShmRegion>> Find(const std::string& owner,
                                                        absl::string_view name) const;
  // `owner`'s regions (empty name: all of them), by name.
  absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> List(const std::string& owner,
                                                                     const std::string& name) const;
  // Registered regions of every owner (for the gauge).
  int64_t size() const;

 private:
  absl::Status CheckEnabled() const;
  // Register's steps: the arguments (name, key and its prefix, offset and
  // size), then the object opened, checked and mapped (not yet registered).
  absl::Status CheckRegistration(const std::string& name, const std::string& key, uint64_t offset,
                                 uint64_t byte_size) const;
  static absl::StatusOr<std::shared_ptr<ShmRegion>> OpenRegion(const std::string& name,
                                                               const std::string& key,
                                                               uint64_t offset, uint64_t byte_size);

  const Options options_;
  mutable std::mutex mu_;
  // (owner, name) -> region; guarded by mu_.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const ShmRegion>> regions_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_OIP_SHM_REGISTRY_H_
