// libFuzzer target A: arbitrary bytes parsed as a tensorops.v1.ExecuteRequest
// and run through tensorops::Execute (decode, validation, kernels, encode)
// with the server's default limits. Any crash, leak or sanitizer report is a
// finding; so is an OK reply that breaks the wire contract (one output with
// the data input's dtype and shape).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "fuzz/fuzz_util.h"
#include "kernels/op_registry.h"
#include "server/v1/execution.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/limits.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  tensorops::fuzz::PropertyViolated("fuzz_execute_bytes", what);
}

using tensorops::fuzz::Registry;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tensorops::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorops::v1::ExecuteRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  tensorops::v1::ExecuteResponse response;
  const absl::Status status = tensorops::Execute(Registry(), request, &response);
  if (!status.ok()) {
    if (status.message().size() > 4096) Fail("error message longer than 4 KiB");
    return 0;
  }
  if (response.outputs_size() != 1) Fail("OK reply without exactly one output");
  if (request.inputs_size() < 1) Fail("OK reply for a request without inputs");
  const auto& in = request.inputs(0);
  const auto& out = response.outputs(0);
  if (out.dtype() != in.dtype()) Fail("output dtype differs from the data input's");
  if (out.shape_size() != in.shape_size()) Fail("output rank differs from the data input's");
  for (int i = 0; i < in.shape_size(); ++i) {
    if (out.shape(i) != in.shape(i)) Fail("output shape differs from the data input's");
  }
  return 0;
}
