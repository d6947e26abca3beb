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
    // Sized at once: a flowing output's chunks land at any offset. The
    // buffer is fresh on every call, yet it gets no huge page advice
    // (kernels/huge_pages.h): with it, a process's first call faulted in huge
    // pages the kernel had never handed out, zeroed at ~0.25 GB/s on this
    // kind of VM (do_huge_pmd_anonymous_page -> folio_zero_user: 42% of the
    // CPU of a client process making one 1 GiB flowing Roll), so the first call cost 5.3-6.5 s of
    // client CPU against 2.1-3.6 s warm; with 4 KiB pages every call costs
    // 2.05-2.12 s, the first included (issue 44: the first streamed call;
    // `sdk_stream_bench --server_pid`, BENCHMARKS.md).
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
