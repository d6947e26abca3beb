// The SDK's own StreamSink for streamed calls that return a Tensor
// (Client::Impl::ExecuteStream); the public sources and sinks (FileSource,
// FileSink, CallbackSource, CallbackSink) are in stream_io.cc. Private to the
// SDK (not under include/).
#ifndef TENSOROPS_CLIENT_STREAM_IO_H_
#define TENSOROPS_CLIENT_STREAM_IO_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "client/tensor_access.h"
#include "kernels/buffer_cache.h"
#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {

// A streamed call's output into memory that becomes the result Tensor: each
// piece is copied once, from gRPC's receive slices to its offset.
// Thread-compatible (StreamSink's contract).
class BufferSink final : public StreamSink {
 public:
  BufferSink() = default;
  BufferSink(const BufferSink&) = delete;
  BufferSink& operator=(const BufferSink&) = delete;
  ~BufferSink() override { Discard(); }

  absl::Status Start(DataType dtype, const std::vector<int64_t>& shape, int64_t bytes) override {
    dtype_ = dtype;
    shape_ = shape;
    bytes_ = bytes;
    // Sized at once (a flowing output's chunks land at any offset) and not
    // zeroed: every byte is written once by Write, and the reader checks
    // that all arrived and their CRC-32 before Take. A big output comes from
    // the process's BufferCache: on this kind of VM the first touch of fresh
    // memory is the costliest thing a big call does (a profile of three
    // 1 GiB streamed Rolls: 32% of the client's CPU in the kernel's
    // clear_page, zeroing the new output's pages), and a buffer a previous
    // call's Tensor gave back is reused instead (BufferCache's policy: it
    // never raises the process's peak, and idle buffers go back to the OS).
    // A new buffer there has huge pages advised before its first touch.
    Discard();
    if (bytes >= BufferCache::kMinBytes) {
      data_ = BufferCache::Global().Allocate(bytes, &capacity_);
    } else {
      data_ = static_cast<char*>(std::malloc(static_cast<size_t>(std::max<int64_t>(bytes, 1))));
      capacity_ = 0;
      if (data_ == nullptr) throw std::bad_alloc();
    }
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    std::memcpy(data_ + offset, data.data(), data.size());
    return absl::OkStatus();
  }
  void Discard() override {
    if (data_ != nullptr) Free(data_, capacity_);
    data_ = nullptr;
  }
  Tensor Take() {
    const int64_t capacity = capacity_;
    std::shared_ptr<const char> owner(
        data_, [capacity](const char* p) { Free(const_cast<char*>(p), capacity); });
    data_ = nullptr;
    const char* data = owner.get();
    return TensorAccess::FromOwned(dtype_, std::move(shape_), std::move(owner), data, bytes_);
  }

 private:
  // capacity > 0: from the BufferCache; 0: from malloc.
  static void Free(char* p, int64_t capacity) {
    if (capacity > 0) {
      BufferCache::Global().Release(p, capacity);
    } else {
      std::free(p);
    }
  }
  DataType dtype_ = DataType::kInvalid;
  std::vector<int64_t> shape_;
  int64_t bytes_ = 0;
  char* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_STREAM_IO_H_
