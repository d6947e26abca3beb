#include "server/oip/shm_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/shape.h"

namespace tensorops {
namespace {

// Names and keys end up in messages; bound them.
// Caller-supplied text in single quotes, cut like BoundedQuote so a
// megabyte-long name never ends up in a status.
std::string Quote(absl::string_view s) {
  if (s.size() <= 64) return absl::StrCat("'", s, "'");
  return absl::StrCat("'", s.substr(0, 64), "...' (", s.size(), " bytes)");
}

// shm_open's own rule, checked here so that a key can never walk out of
// /dev/shm: one leading '/', then at least one character and no other '/'.
absl::Status CheckKey(const std::string& key) {
  if (key.size() < 2 || key[0] != '/' || key.find('/', 1) != std::string::npos ||
      key.size() > 255 || key.find('\0') != std::string::npos || key == "/." || key == "/..") {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", Quote(key),
                     " is not a POSIX shared memory name: it must be '/' followed by 1 to 254 "
                     "characters with no other '/'"));
  }
  return absl::OkStatus();
}

}  // namespace

ShmRegion::~ShmRegion() {
  if (map_ != nullptr) munmap(map_, map_length_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<char*> ShmRegion::Bytes(uint64_t offset, uint64_t size,
                                       absl::string_view what) const {
  // Written so that nothing overflows: offset <= byte_size, then size <= rest.
  if (offset > byte_size_ || size > byte_size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shared memory region ", Quote(name_),
                                                   " holds ", byte_size_, " bytes; offset ", offset,
                                                   " + byte_size ", size, " does not fit in it"));
  }
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    return absl::InternalError(absl::StrCat("shared memory region ", Quote(name_),
                                            ": fstat failed: ", std::strerror(errno)));
  }
  if (static_cast<uint64_t>(st.st_size) < offset_ + byte_size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shared memory region ", Quote(name_), " is gone: its object ", Quote(key_),
        " now holds ", st.st_size, " bytes, less than the registered offset ", offset_,
        " + byte_size ", byte_size_, " (was it truncated after registering?)"));
  }
  return base_ + offset;
}

bool ShmRegion::Overlaps(uint64_t a_off, uint64_t a_size, const ShmRegion& other, uint64_t b_off,
                         uint64_t b_size) const {
  if (dev_ != other.dev_ || ino_ != other.ino_ || a_size == 0 || b_size == 0) return false;
  // Offsets within the object; all ranges were checked against their regions.
  const uint64_t a = offset_ + a_off;
  const uint64_t b = other.offset_ + b_off;
  return a < b + b_size && b < a + a_size;
}

absl::Status ShmRegistry::CheckEnabled() const {
  if (options_.enabled) return absl::OkStatus();
  return absl::UnavailableError(
      "system shared memory is off on this server (start it with --shared_memory=system)");
}

absl::Status ShmRegistry::CheckRegistration(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size) const {
  if (name.empty()) return absl::InvalidArgumentError("name: a region needs a name");
  if (name.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("name ", Quote(name), " is longer than 256 bytes"));
  }
  if (absl::Status st = CheckKey(key); !st.ok()) return st;
  if (!absl::StartsWith(key, options_.key_prefix)) {
    return absl::PermissionDeniedError(absl::StrCat("key ", Quote(key), " does not start with ",
                                                    Quote(options_.key_prefix),
                                                    " (--shared_memory_key_prefix)"));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("region ", Quote(name), ": byte_size must be at least 1"));
  }
  if (offset > static_cast<uint64_t>(INT64_MAX) ||
      byte_size > static_cast<uint64_t>(INT64_MAX) - offset) {
    return absl::InvalidArgumentError(absl::StrCat("region ", Quote(name), ": offset ", offset,
                                                   " + byte_size ", byte_size, " overflows"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ShmRegion>> ShmRegistry::OpenRegion(const std::string& name,
                                                                   const std::string& key,
                                                                   uint64_t offset,
                                                                   uint64_t byte_size) {
  auto region = std::shared_ptr<ShmRegion>(new ShmRegion());
  region->name_ = name;
  region->key_ = key;
  region->offset_ = offset;
  region->byte_size_ = byte_size;
  // O_NOFOLLOW is implied by glibc's shm_open; O_CLOEXEC too.
  region->fd_ = shm_open(key.c_str(), O_RDWR, 0);
  if (region->fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("region ", Quote(name), ": no shared memory object ",
                                              Quote(key), " exists"));
    }
    return absl::InvalidArgumentError(absl::StrCat("region ", Quote(name), ": cannot open ",
                                                   Quote(key), ": ", std::strerror(err)));
  }
  struct stat st;
  if (fstat(region->fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("region ", Quote(name), ": ", Quote(key), " is not a shared memory object"));
  }
  if (static_cast<uint64_t>(st.st_size) < offset + byte_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("region ", Quote(name), ": offset ", offset, " + byte_size ", byte_size,
                     " is beyond the end of ", Quote(key), ", which holds ", st.st_size, " bytes"));
  }
  region->dev_ = st.st_dev;
  region->ino_ = st.st_ino;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset - offset % page;
  region->map_length_ = static_cast<size_t>(offset + byte_size - map_offset);
  void* map = mmap(nullptr, region->map_length_, PROT_READ | PROT_WRITE, MAP_SHARED, region->fd_,
                   static_cast<off_t>(map_offset));
  if (map == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("region ", Quote(name), ": cannot map ",
                                                     Quote(key), ": ", std::strerror(errno)));
  }
  region->map_ = map;
  region->base_ = static_cast<char*>(map) + (offset - map_offset);

  return region;
}

absl::Status ShmRegistry::Register(const std::string& owner, const std::string& name,
                                   const std::string& key, uint64_t offset, uint64_t byte_size) {
  if (absl::Status st = CheckEnabled(); !st.ok()) return st;
  if (absl::Status st = CheckRegistration(name, key, offset, byte_size); !st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (regions_.count({owner, name}) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("shared memory region ", Quote(name), " is already registered"));
    }
    if (static_cast<int64_t>(regions_.size()) >= options_.max_regions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server holds ", regions_.size(),
                       " shared memory regions, its limit; unregister some"));
    }
  }

  absl::StatusOr<std::shared_ptr<ShmRegion>> region = OpenRegion(name, key, offset, byte_size);
  if (!region.ok()) return region.status();
  std::lock_guard<std::mutex> lock(mu_);
  // Checked again: another Register of the same name may have won meanwhile
  // (our mapping is then released with `region`).
  auto [it, inserted] = regions_.emplace(std::make_pair(owner, name), *std::move(region));
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("shared memory region ", Quote(name), " is already registered"));
  }
  return absl::OkStatus();
}

absl::Status ShmRegistry::Unregister(const std::string& owner, const std::string& name) {
  if (absl::Status st = CheckEnabled(); !st.ok()) return st;
  // Regions are destroyed (unmapped) outside the lock, by the last holder.
  std::vector<std::shared_ptr<const ShmRegion>> removed;
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->first.first == owner) {
        removed.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
    return absl::OkStatus();
  }
  auto it = regions_.find({owner, name});
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no shared memory region named ", Quote(name), " is registered"));
  }
  removed.push_back(std::move(it->second));
  regions_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ShmRegion>> ShmRegistry::Find(const std::string& owner,
                                                                   absl::string_view name) const {
  if (absl::Status st = CheckEnabled(); !st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find({owner, std::string(name)});
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no shared memory region named ", Quote(name), " is registered"));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> ShmRegistry::List(
    const std::string& owner, const std::string& name) const {
  if (absl::Status st = CheckEnabled(); !st.ok()) return st;
  std::vector<std::shared_ptr<const ShmRegion>> out;
  if (!name.empty()) {
    absl::StatusOr<std::shared_ptr<const ShmRegion>> one = Find(owner, name);
    if (!one.ok()) return one.status();
    out.push_back(*std::move(one));
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, region] : regions_) {
    if (k.first == owner) out.push_back(region);
  }
  return out;
}

int64_t ShmRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(regions_.size());
}

}  // namespace tensorops
