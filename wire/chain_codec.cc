#include "wire/chain_codec.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/field_path.h"
#include "kernels/status_macros.h"
#include "wire/attrs_codec.h"

namespace tensorops {

absl::StatusOr<std::vector<ChainStep>> DecodeChain(
    const google::protobuf::RepeatedPtrField<v1::Step>& steps, const RequestLimits& limits,
    int64_t* request_bytes, std::vector<DecodedTensor>* owned) {
  RETURN_IF_ERROR(CheckChainLength(steps.size()));
  std::vector<ChainStep> out(steps.size());
  for (int s = 0; s < steps.size(); ++s) {
    const v1::Step& step = steps.Get(s);
    out[s].op = step.op();
    out[s].attrs = DecodeAttrs(step.attrs());
    for (int i = 0; i < step.inputs_size(); ++i) {
      const std::string what = absl::StrCat("then[", s, "].inputs[", i, "]");
      ASSIGN_OR_RETURN(DecodedTensor t, AtField(DecodeTensor(step.inputs(i), what, &limits), what));
      const int64_t bytes = DecodedBytes(t.view);
      if (bytes > limits.max_request_bytes - *request_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "request inputs up to ", what, " need more than ", limits.max_request_bytes,
            " bytes decoded; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
      }
      *request_bytes += bytes;
      out[s].inputs.push_back(t.view);
      owned->push_back(std::move(t));
    }
  }
  return out;
}

std::string ExecuteFieldPath(const google::protobuf::RepeatedPtrField<v1::Tensor>& inputs,
                             const google::protobuf::RepeatedPtrField<v1::Step>& then,
                             absl::string_view op_path) {
  int64_t i = 0, s = 0;
  absl::string_view rest;
  if (SplitIndexedPath(op_path, "inputs", &i, &rest) && i < inputs.size()) {
    return absl::StrCat("inputs[", i, "]", TensorFieldPath(inputs.Get(static_cast<int>(i)), rest));
  }
  absl::string_view step_rest;
  if (SplitIndexedPath(op_path, "then", &s, &step_rest) && s < then.size() &&
      absl::ConsumePrefix(&step_rest, ".") && SplitIndexedPath(step_rest, "inputs", &i, &rest)) {
    const v1::Step& step = then.Get(static_cast<int>(s));
    if (i < step.inputs_size()) {
      return absl::StrCat("then[", s, "].inputs[", i, "]",
                          TensorFieldPath(step.inputs(static_cast<int>(i)), rest));
    }
  }
  return std::string(op_path);
}

absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Step>> ParseChainJson(
    absl::string_view json, absl::string_view what) {
  // Parsed as ExecuteRequest.then, so that int64 values keep every digit
  // (a detour through google.protobuf.Value would make them doubles); the
  // text must be an array and set nothing else.
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(json);
  v1::ExecuteRequest holder;
  absl::Status parsed = absl::InvalidArgumentError("not an array");
  if (!trimmed.empty() && trimmed.front() == '[') {
    const auto status =
        google::protobuf::util::JsonStringToMessage(absl::StrCat("{\"then\":", json, "}"), &holder);
    parsed = status.ok() ? absl::OkStatus() : absl::InvalidArgumentError(status.ToString());
  }
  if (parsed.ok() && (!holder.op().empty() || holder.has_attrs() || holder.inputs_size() > 0)) {
    parsed = absl::InvalidArgumentError("more than one array");
  }
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        " must be a JSON array of tensorops.v1.Step objects (proto3 JSON), e.g. "
        "[{\"op\":\"Roll\",\"inputs\":[{\"dtype\":\"DATA_TYPE_INT64\",\"shape\":[1],"
        "\"int64_data\":[1]},{\"dtype\":\"DATA_TYPE_INT64\",\"shape\":[1],\"int64_data\":[0]}]}]: ",
        absl::StrReplaceAll(parsed.message().substr(0, 200), {{"\n", " "}})));
  }
  return std::move(*holder.mutable_then());
}

}  // namespace tensorops
