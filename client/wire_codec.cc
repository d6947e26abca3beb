#include "client/wire_codec.h"

#include "kernels/status_macros.h"
#include "server/tensor_codec.h"

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

}  // namespace tensorops::client_internal
