// TensorAccess: the SDK's private door into tensorops::Tensor (a friend of
// it), for the wire conversion: Tensors built around bytes received from the
// wire without copying them, and the owner of a Tensor's bytes, so a chunk
// can be sent from them in place. Not part of the public API (not under
// include/).
//
// Thread-safety: stateless; safe from any thread.
#ifndef TENSOROPS_CLIENT_TENSOR_ACCESS_H_
#define TENSOROPS_CLIENT_TENSOR_ACCESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorops/tensor.h"

namespace tensorops {
inline namespace client_v1 {

// Builds Tensors around bytes received from the wire without copying them.
class TensorAccess {
 public:
  static Tensor FromRaw(DataType dtype, std::vector<int64_t> shape, std::string bytes) {
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    auto owned = std::make_shared<const std::string>(std::move(bytes));
    t.data_ = owned->data();
    t.num_bytes_ = static_cast<int64_t>(owned->size());
    t.owned_ = std::move(owned);
    return t;
  }
  // A Tensor of `bytes` at `data`, kept alive by `owner` (memory the SDK
  // filled itself, e.g. a streamed output written where it arrived).
  static Tensor FromOwned(DataType dtype, std::vector<int64_t> shape,
                          std::shared_ptr<const void> owner, const void* data, int64_t bytes) {
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.data_ = data;
    t.num_bytes_ = bytes;
    t.owned_ = std::move(owner);
    return t;
  }
  // What keeps a non-STRING tensor's bytes alive; null for a View (memory
  // the caller owns).
  static std::shared_ptr<const void> Owner(const Tensor& t) { return t.owned_; }
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_TENSOR_ACCESS_H_
