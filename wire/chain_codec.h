// The steps of a chain (tensorops.v1 Step, ../shared/api.md "Chains") as the
// kernels take them (kernels/op_registry.h ChainStep): decoded once here for
// every door that carries them (Execute, ExecuteStream's header, the Open
// Inference Protocol's `then` parameter).
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_WIRE_CHAIN_CODEC_H_
#define TENSOROPS_WIRE_CHAIN_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "kernels/op_registry.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/limits.h"
#include "wire/tensor_codec.h"

namespace tensorops {

// Decodes `steps` (names "then[i].inputs[j]" in errors) under `limits`:
// more than kMaxChainSteps steps is INVALID_ARGUMENT; each tensor as
// DecodeTensor checks it; their decoded bytes are added to `*request_bytes`,
// RESOURCE_EXHAUSTED past max_request_bytes. The decoded tensors are
// appended to `*owned` (the ChainSteps view them, and `steps`' message);
// both must outlive the result.
absl::StatusOr<std::vector<ChainStep>> DecodeChain(
    const google::protobuf::RepeatedPtrField<v1::Step>& steps, const RequestLimits& limits,
    int64_t* request_bytes, std::vector<DecodedTensor>* owned);

// An error's field path in the kernels' op vocabulary (kernels/field_path.h)
// as the field of a request whose first op's inputs are `inputs` and whose
// chain is `then` (ExecuteRequest's): inputs[i] and then[s].inputs[j] name
// the data field their tensor sets (TensorFieldPath: ".data[3]" becomes
// ".int64_data[3]"); attrs, op and then[s] paths are the request's already.
std::string ExecuteFieldPath(const google::protobuf::RepeatedPtrField<v1::Tensor>& inputs,
                             const google::protobuf::RepeatedPtrField<v1::Step>& then,
                             absl::string_view op_path);

// Parses a chain written as JSON, a JSON array of Steps in the proto3 JSON
// mapping (the Open Inference Protocol's `then` parameter), e.g.
//   [{"op":"Roll","inputs":[{"dtype":"DATA_TYPE_INT64","shape":[1],"int64_data":[1]},
//                           {"dtype":"DATA_TYPE_INT64","shape":[1],"int64_data":[0]}]}]
// INVALID_ARGUMENT naming `what` when it is not one.
absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Step>> ParseChainJson(absl::string_view json,
                                                                            absl::string_view what);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_CHAIN_CODEC_H_
