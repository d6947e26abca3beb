#include "kernels/tensor.h"

#include <utility>

#include "kernels/buffer_cache.h"

namespace tensorops {

int64_t NumElements(const Shape& shape) {
  // A zero dim anywhere makes the product 0; check first, because the dims
  // before it may multiply past int64 (a valid shape like [2^40, 2^40, 0]).
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  const int64_t bytes = num_bytes();
  if (bytes >= BufferCache::kMinBytes) {
    int64_t capacity = 0;
    char* p = BufferCache::Global().Allocate(bytes, &capacity);
    data_ = std::unique_ptr<char[], TensorBufferDeleter>(p, TensorBufferDeleter{capacity});
    return;
  }
  // new char[0] is valid; keep a non-null pointer so views are uniform.
  data_.reset(new char[bytes > 0 ? bytes : 1]);
}

void TensorBufferDeleter::operator()(char* p) const {
  if (capacity > 0) {
    BufferCache::Global().Release(p, capacity);
  } else {
    delete[] p;
  }
}

}  // namespace tensorops
