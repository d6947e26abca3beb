// libFuzzer target: the Open Inference Protocol's HTTP/JSON request decoder.
// The first byte picks the model (the path) and whether the body has an
// Inference-Header-Content-Length (its value from the next two bytes); the
// rest is the body: JSON, optionally followed by Triton's binary tensor data.
// It runs through JsonInferRequest::Parse, PreparedInfer (decode, validation,
// kernels) and the answer's encoding, with the default limits and shared
// memory off. Any crash, leak or sanitizer report is a finding; so is an
// INTERNAL error, an error message over 4 KiB, or an OK answer that is not
// one JSON object (followed by exactly its binary blocks).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_util.h"
#include "rapidjson/document.h"
#include "server/http/json_binding.h"
#include "server/oip/oip_codec.h"
#include "wire/limits.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  tensorops::fuzz::PropertyViolated("fuzz_rest_infer", what);
}

void CheckError(const absl::Status& s) {
  if (s.message().size() > 4096) Fail("error message longer than 4 KiB");
  if (s.code() == absl::StatusCode::kInternal) Fail("INTERNAL for a request");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  static const char* const kModels[] = {"Roll", "Reverse", "ReverseSequence",
                                        "onnx.ReverseSequence"};
  const char* model = kModels[data[0] & 3];
  std::optional<int64_t> header_length;
  if (data[0] & 4) header_length = data[1] | (data[2] << 8);
  const std::string body(reinterpret_cast<const char*>(data + 3), size - 3);

  const tensorops::RequestLimits limits;
  auto parsed = tensorops::JsonInferRequest::Parse(body, header_length, model, "", limits);
  if (!parsed.ok()) {
    CheckError(parsed.status());
    return 0;
  }
  auto prepared = tensorops::PreparedInfer::Make(tensorops::fuzz::Registry(), (*parsed)->request(),
                                                 limits, nullptr, "");
  if (!prepared.ok()) {
    CheckError(prepared.status());
    return 0;
  }
  tensorops::JsonInferResponse response;
  if (!(*prepared)->Run(&response).ok()) Fail("Run failed without shared memory");
  tensorops::JsonText text;
  std::vector<tensorops::Tensor> binary;
  if (absl::Status s = response.Encode(**parsed, &text, &binary); !s.ok()) {
    // Only BYTES that are not UTF-8 cannot be JSON.
    if (s.code() != absl::StatusCode::kInvalidArgument) Fail("Encode failed otherwise");
    CheckError(s);
    return 0;
  }
  const absl::string_view json = text.view();
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag | rapidjson::kParseFullPrecisionFlag>(json.data(),
                                                                                 json.size());
  if (doc.HasParseError() || !doc.IsObject()) Fail("the answer is not a JSON object");
  if (!doc.HasMember("outputs") || !doc["outputs"].IsArray()) Fail("the answer has no outputs");
  size_t blocks = 0;
  for (const auto& out : doc["outputs"].GetArray()) {
    if (out.HasMember("parameters")) ++blocks;
  }
  if (blocks != binary.size()) Fail("binary blocks do not match binary_data_size outputs");
  return 0;
}
