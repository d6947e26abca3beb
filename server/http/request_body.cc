#include "server/http/request_body.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kernels/status_macros.h"

namespace tensorops {

GrowableBuffer& GrowableBuffer::operator=(GrowableBuffer&& other) noexcept {
  if (this != &other) {
    Unmap();
    base_ = std::exchange(other.base_, nullptr);
    reserved_ = std::exchange(other.reserved_, 0);
    writable_ = std::exchange(other.writable_, 0);
  }
  return *this;
}

bool GrowableBuffer::MakeWritable(uint64_t n, uint64_t max_bytes) {
  if (n <= writable_) return true;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (base_ == nullptr) {
    reserved_ = (max_bytes + page - 1) / page * page;
    void* p =
        mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      reserved_ = 0;
      return false;
    }
    base_ = static_cast<char*>(p);
  }
  const uint64_t to = std::min(reserved_, (n + page - 1) / page * page);
  if (mprotect(base_ + writable_, to - writable_, PROT_READ | PROT_WRITE) != 0) return false;
  writable_ = to;
  return true;
}

void GrowableBuffer::Unmap() {
  if (base_ != nullptr) munmap(base_, reserved_);
  base_ = nullptr;
}

absl::Status BodyBytes::ReserveExact(uint64_t n) {
  RETURN_IF_ERROR(Count(n, absl::StrCat("request body of ", n, " bytes")));
  storage_ = Tensor(DType::kUInt8, {static_cast<int64_t>(n)});
  data_ = storage_.mutable_data_as<char>();
  capacity_ = n;
  exact_ = true;
  return absl::OkStatus();
}

absl::Status BodyBytes::MakeRoom(uint64_t n) {
  if (size_ + n > capacity_) {
    if (absl::Status s = GrowTo(size_ + n); !s.ok()) {
      refusal_ = s;
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status BodyBytes::Count(uint64_t n, absl::string_view what) {
  if (pipeline_ == nullptr) return absl::OkStatus();
  absl::Status s = pipeline_->Reserve(static_cast<int64_t>(n), &reservation_);
  if (s.ok()) return s;
  // The refusal's details go with it (RetryInfo: Retry-After; ErrorInfo
  // REQUEST_OVER_INFLIGHT_BUDGET: 413 rather than 503).
  absl::Status out(s.code(), absl::StrCat(what, ": ", s.message()));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status BodyBytes::GrowTo(uint64_t need) {
  if (exact_ || need > max_bytes_) {
    // Past a declared length or the body limit: the parser stops both first.
    return absl::InternalError("request body past its declared length or the body limit");
  }
  const uint64_t step = std::clamp(need / 8, kMinStep, kMaxStep);
  const uint64_t room = std::min(max_bytes_, need + step);
  RETURN_IF_ERROR(Count(room, absl::StrCat("chunked request body at ", need, " bytes")));
  if (!growable_.MakeWritable(room, max_bytes_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no memory for a request body of ", need, " bytes: ", std::strerror(errno)));
  }
  data_ = growable_.data();
  capacity_ = room;
  return absl::OkStatus();
}

}  // namespace tensorops
