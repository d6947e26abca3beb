#include "client/wire_codec.h"

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/op_registry.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "wire/attrs_codec.h"
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
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".dtype ", header.dtype(), " is not a streamable element type"));
  }
  return CheckedByteSize(absl::Span<const int64_t>(header.shape().data(), header.shape_size()),
                         ElementWidth(dtype), absl::StrCat(what, ".shape"));
}

absl::StatusOr<int64_t> InferredOutputBytes(const v1::StreamHeader& header) {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();  // never destroyed: used until exit
    RegisterBuiltinOps(r);
    return r;
  }();
  if (registry->Find(header.op()) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("op ", BoundedQuote(header.op()), " is not built into the SDK"));
  }
  std::vector<TensorView> views;
  views.reserve(header.inputs_size());
  for (int i = 0; i < header.inputs_size(); ++i) {
    const v1::TensorHeader& h = header.inputs(i);
    ASSIGN_OR_RETURN(const int64_t bytes, StreamedTensorBytes(h, absl::StrCat("inputs[", i, "]")));
    (void)bytes;  // only the check: shapes are valid and their sizes fit
    views.push_back(TensorView{FromProtoDataType(h.dtype()),
                               Shape(h.shape().begin(), h.shape().end()), nullptr});
  }
  ASSIGN_OR_RETURN(std::vector<TensorType> outputs,
                   registry->InferOutputs(header.op(), views, DecodeAttrs(header.attrs())));
  // A chain: each step's inference on the previous output and the step's
  // own (inline) inputs; the reply is the last step's outputs.
  for (int s = 0; s < header.then_size(); ++s) {
    const v1::Step& step = header.then(s);
    const std::string what = absl::StrCat("then[", s, "]");
    if (registry->Find(step.op()) == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(what, ": op ", BoundedQuote(step.op()), " is not built into the SDK"));
    }
    if (outputs.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no input"));
    std::vector<DecodedTensor> decoded;
    decoded.reserve(step.inputs_size());
    views.assign(1, TensorView{outputs[0].dtype, outputs[0].shape, nullptr});
    for (int i = 0; i < step.inputs_size(); ++i) {
      ASSIGN_OR_RETURN(DecodedTensor d,
                       DecodeTensor(step.inputs(i), absl::StrCat(what, ".inputs[", i, "]")));
      views.push_back(d.view);
      decoded.push_back(std::move(d));
    }
    ASSIGN_OR_RETURN(outputs, registry->InferOutputs(step.op(), views, DecodeAttrs(step.attrs())));
  }
  int64_t total = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    ASSIGN_OR_RETURN(const int64_t bytes,
                     CheckedByteSize(outputs[o].shape, ElementWidth(outputs[o].dtype),
                                     absl::StrCat("outputs[", o, "]")));
    total += bytes;
  }
  return total;
}

}  // namespace tensorops::client_internal
