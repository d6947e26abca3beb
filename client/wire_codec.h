// Checks reply tensors with the wire layer's codec (wire/tensor_codec.h), the
// one the server decodes requests with.
// Kept apart from client.cc because the codec's kernel headers declare
// tensorops::Tensor too: no translation unit includes both.
//
// Thread-safety: stateless; safe from any thread.
#ifndef TENSOROPS_CLIENT_WIRE_CODEC_H_
#define TENSOROPS_CLIENT_WIRE_CODEC_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensorops/v1/tensorops.pb.h"

namespace tensorops::client_internal {

// Validates `*tensor` (dtype, shape, element count, value ranges; `what`
// names it in errors) and, if its elements came in a typed field, rewrites
// them as raw_data, so that afterwards every non-STRING tensor is raw.
absl::Status NormalizeToRaw(v1::Tensor* tensor, absl::string_view what);

// Bytes of a streamed tensor (ExecuteStream's TensorHeader): element count x
// width, checked as the server checks it (kernels/shape.h); INVALID_ARGUMENT
// for a bad dtype (STRING included), a negative dim or an int64 overflow.
absl::StatusOr<int64_t> StreamedTensorBytes(const v1::TensorHeader& header, absl::string_view what);

// Output bytes of a streamed call, from the op's output inference
// (OpDef::infer) for the built-in ops the SDK was built with: known before the
// call starts, so progress can show a total at once. A chain's (header.then)
// are its last step's, inferred step by step. NOT_FOUND for an op the SDK
// does not know (a newer server's), in any step; the header's own errors as
// the server reports them.
absl::StatusOr<int64_t> InferredOutputBytes(const v1::StreamHeader& header);

}  // namespace tensorops::client_internal

#endif  // TENSOROPS_CLIENT_WIRE_CODEC_H_
