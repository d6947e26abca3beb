// libFuzzer target: arbitrary bytes parsed as an inference.ModelInferRequest
// (the Open Inference Protocol) and run through PreparedInfer (decode,
// validation, kernels, encode) with the server's default limits and system
// shared memory off (as by default; the decoder must refuse shared-memory
// parameters cleanly). Any crash, leak or sanitizer report is a finding; so is
// an OK reply that breaks the protocol: one output per requested output (all
// when none is requested), each with the data input's datatype and shape and
// one raw_output_contents entry of the right size.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_util.h"
#include "inference/grpc_service.pb.h"
#include "server/grpc/oip_binding.h"
#include "server/oip/oip_codec.h"
#include "wire/limits.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  tensorops::fuzz::PropertyViolated("fuzz_model_infer", what);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tensorops::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto prepared = tensorops::PrepareModelInfer(tensorops::fuzz::Registry(), request,
                                               tensorops::RequestLimits(), nullptr, "");
  if (!prepared.ok()) {
    if (prepared.status().message().size() > 4096) Fail("error message longer than 4 KiB");
    if (prepared.status().code() == absl::StatusCode::kInternal) Fail("INTERNAL for a request");
    return 0;
  }
  inference::ModelInferResponse response;
  if (!tensorops::RunModelInfer(**prepared, &response).ok())
    Fail("Run failed without shared memory");
  const int want = request.outputs_size() > 0 ? request.outputs_size() : 1;
  if (response.outputs_size() != want) Fail("wrong number of outputs");
  if (response.raw_output_contents_size() != want) Fail("raw entries do not match outputs");
  if (response.id() != request.id()) Fail("id not echoed");
  // The data input: the one named as the op spec's first input.
  const std::string& data_name = (*prepared)->op().spec.inputs.front().name;
  const inference::ModelInferRequest::InferInputTensor* in = nullptr;
  for (const auto& t : request.inputs()) {
    if (t.name() == data_name) in = &t;
  }
  if (in == nullptr) Fail("OK reply without a data input");
  for (const auto& out : response.outputs()) {
    if (out.datatype() != in->datatype()) Fail("output datatype differs from the data input's");
    if (out.shape_size() != in->shape_size()) Fail("output rank differs from the data input's");
    for (int i = 0; i < in->shape_size(); ++i) {
      if (out.shape(i) != in->shape(i)) Fail("output shape differs from the data input's");
    }
  }
  if (in->datatype() != "BYTES") {
    const int64_t bytes = (*prepared)->output_bytes();
    for (const auto& raw : response.raw_output_contents()) {
      if (static_cast<int64_t>(raw.size()) != bytes) Fail("raw output of the wrong size");
    }
  }
  return 0;
}
