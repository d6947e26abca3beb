#include "kernels/tensor.h"

#include <utility>

#include "kernels/huge_pages.h"

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
  // new char[0] is valid; keep a non-null pointer so views are uniform.
  data_.reset(new char[bytes > 0 ? bytes : 1]);
  AdviseHugePages(data_.get(), bytes);
}

}  // namespace tensorops
