#include "client/wire_codec.h"

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "wire/tensor_codec.h"

namespace tensorops::client_internal {

absl::Status NormalizeToRaw(v1::Tensor* tensor, absl::string_view what) {
  ASSIGN_OR_RETURN(DecodedTensor decoded, DecodeTensor(*tensor, what));
  if (decoded.encoding == Encoding::kRaw || decoded.view.dtype == DType::kString) {
    return absl::OkStatus();
  }
  // The view points into decoded.storage, not into *tensor: safe to re-encode.
  v1::Tensor raw;
  EncodeTensor(decoded.view, Encoding::kRaw, &raw);
  tensor->Swap(&raw);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StreamedTensorBytes(const v1::TensorHeader& header,
                                            absl::string_view what) {
  const DType dtype = FromProtoDataType(header.dtype());
  if (dtype == DType::kInvalid || dtype == DType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(what, ".dtype ", header.dtype(),
                                                   " is not a streamable element type"));
  }
  return CheckedByteSize(absl::Span<const int64_t>(header.shape().data(), header.shape_size()),
                         ElementWidth(dtype), absl::StrCat(what, ".shape"));
}

}  // namespace tensorops::client_internal
