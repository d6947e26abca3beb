// Tensors as kernels see them: a dtype, a row-major shape and one contiguous
// buffer of NumElements(shape) * ElementWidth(dtype) bytes.
//
// TensorView does not own its bytes (inputs point into the request);
// Tensor owns them. Neither is synchronised: share read-only or not at all.
#ifndef TENSOROPS_KERNELS_TENSOR_H_
#define TENSOROPS_KERNELS_TENSOR_H_

#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "kernels/dtype.h"

namespace tensorops {

// Row-major dimensions; empty = scalar. Inline storage covers every rank we
// expect without a heap allocation per request.
using Shape = absl::InlinedVector<int64_t, 6>;

// Product of dims with no overflow check: only for shapes already validated
// (see CheckedNumElements in shape.h).
int64_t NumElements(const Shape& shape);

struct TensorView {
  DType dtype = DType::kInvalid;
  Shape shape;
  // NumElements(shape) * ElementWidth(dtype) bytes, with no alignment
  // guarantee (it may point into a request's raw_data): read elements with
  // memcpy, not through data_as<T>(), unless the buffer is known to be ours.
  const void* data = nullptr;

  int64_t num_elements() const { return NumElements(shape); }
  int64_t num_bytes() const { return num_elements() * ElementWidth(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data);
  }
};

// Frees a Tensor's buffer: through BufferCache::Global() what came from it
// (capacity > 0), else with delete[].
struct TensorBufferDeleter {
  int64_t capacity = 0;
  void operator()(char* p) const;
};

// Owns a buffer sized for (dtype, shape). The bytes are uninitialised until
// written. Buffers of BufferCache::kMinBytes and more come from (and go back
// to) BufferCache::Global(), so a big call reuses the pages of the last one.
class Tensor {
 public:
  Tensor() = default;
  // `shape` must already be validated (no negative dims, byte size fits int64).
  Tensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  int64_t num_bytes() const { return num_elements() * ElementWidth(dtype_); }
  void* mutable_data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* mutable_data_as() {
    return static_cast<T*>(mutable_data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  TensorView view() const { return TensorView{dtype_, shape_, data_.get()}; }

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  std::unique_ptr<char[], TensorBufferDeleter> data_;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_TENSOR_H_
