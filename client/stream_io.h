// The SDK's own StreamSink for streamed calls that return a Tensor
// (Client::Impl::ExecuteStream); the public sources and sinks (FileSource,
// FileSink, CallbackSource, CallbackSink) are in stream_io.cc. Private to the
// SDK (not under include/).
#ifndef TENSOROPS_CLIENT_STREAM_IO_H_
#define TENSOROPS_CLIENT_STREAM_IO_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "client/tensor_access.h"
#include "kernels/huge_pages.h"
#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {

// A streamed call's output into memory that becomes the result Tensor: each
// piece is copied once, from gRPC's receive slices to its offset.
// Thread-compatible (StreamSink's contract).
class BufferSink final : public StreamSink {
 public:
  absl::Status Start(DataType dtype, const std::vector<int64_t>& shape, int64_t bytes) override {
    dtype_ = dtype;
    shape_ = shape;
    // Sized at once: a flowing output's chunks land at any offset. Huge
    // pages are advised between reserve() (a fresh mapping, untouched) and
    // resize() (its zero-fill is the first touch): advised after the touch,
    // every 4 KiB page of the output faulted on its own (issue 44's profile
    // of a 1 GiB streamed Roll: 30% of the SDK's time in page faults); now
    // ~130k instead of ~384k faults per 1 GiB call.
    // Kept by measurement against no advice (2026-11-29, 1 GiB flowing Roll,
    // 4 calls per fresh client process, load < 2; `sdk_stream_bench
    // --server_pid`): without it every call took 2.01-2.12 s (first 1.05x a
    // warm one); with it 1.50-4.54 s, a warm call's best 1.5 s, and a
    // process's first call up to 2.9x a warm one, when its huge pages are
    // ones the VM's host never backed. The speed guard's cell (best of 3)
    // fell from 1.00x to 0.65x the duplex echo without it.
    data_.reserve(static_cast<size_t>(bytes));
    AdviseHugePages(data_.data(), bytes);
    data_.resize(static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    std::memcpy(data_.data() + offset, data.data(), data.size());
    return absl::OkStatus();
  }
  void Discard() override { std::string().swap(data_); }
  Tensor Take() { return TensorAccess::FromRaw(dtype_, std::move(shape_), std::move(data_)); }

 private:
  DataType dtype_ = DataType::kInvalid;
  std::vector<int64_t> shape_;
  std::string data_;
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_STREAM_IO_H_
