// The Open Inference Protocol's HTTP/JSON binding: an infer request body
// (JSON, optionally followed by Triton's binary tensor data) -> InferRequest
// (server/oip/infer_request.h), and the OIP core's named outputs -> the JSON
// (and binary) answer. Rules: ../shared/api-rest.md ("Infer in JSON",
// "Binary tensor data").
//
// Every input not in shared memory reaches the core as raw little-endian
// bytes: a binary block is a view of the body, JSON `data` is converted once
// into an owned buffer (integers exactly, floats through the nearest double
// rounded to nearest even into the type), so JSON and binary inputs may be mixed.
//
// Thread-safety: a JsonInferRequest or JsonInferResponse is used by one
// thread at a time; the free functions are stateless.
#ifndef TENSOROPS_SERVER_HTTP_JSON_BINDING_H_
#define TENSOROPS_SERVER_HTTP_JSON_BINDING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/tensor.h"
#include "server/oip/infer_request.h"
#include "wire/limits.h"

namespace tensorops {

// A parsed infer body. Holds the parsed JSON and the converted JSON data;
// its InferRequest views them and the body, which must outlive it (and, for
// binary inputs, the PreparedInfer made from it).
class JsonInferRequest {
 public:
  // `body`: the whole request body; `header_length`: the value of
  // Inference-Header-Content-Length (nullopt: the body is all JSON).
  // `model`, `version`: from the path. INVALID_ARGUMENT naming the field for
  // bad JSON, shapes, counts, datatypes, binary sizes; RESOURCE_EXHAUSTED
  // for a tensor over `limits`.
  static absl::StatusOr<std::unique_ptr<JsonInferRequest>> Parse(
      absl::string_view body, std::optional<int64_t> header_length, absl::string_view model,
      absl::string_view version, const RequestLimits& limits);
  ~JsonInferRequest();

  const InferRequest& request() const { return request_; }
  // Whether output `name` is answered in binary (its `binary_data`
  // parameter, else the request's `binary_data_output`), or is written to
  // shared memory (then it has neither data nor binary_data_size).
  bool OutputBinary(absl::string_view name) const;
  bool OutputInSharedMemory(absl::string_view name) const;
  // Whether the request had an "id" (the answer echoes it).
  bool has_id() const;

 private:
  struct Impl;
  JsonInferRequest();
  std::unique_ptr<Impl> impl_;
  InferRequest request_;
};

// An answer's JSON text, in one buffer that big answers reuse from
// BufferCache::Global(): a 16 MiB FP32 output is 45-60 MB of text, and fresh
// pages for it (a page fault per 4 KiB) cost about as much as writing it.
class JsonText {
 public:
  absl::string_view view() const {
    return size_ == 0 ? absl::string_view()
                      : absl::string_view(buffer_.data_as<char>(), static_cast<size_t>(size_));
  }
  int64_t size() const { return size_; }

 private:
  friend class JsonInferResponse;  // writes it
  Tensor buffer_;                  // UINT8, at least size_ bytes
  int64_t size_ = 0;
};

// Collects the core's outputs, then encodes the answer.
class JsonInferResponse final : public InferResponseWriter {
 public:
  void SetModel(absl::string_view name, absl::string_view version, absl::string_view id) override;
  char* AddOutput(absl::string_view name, absl::string_view datatype,
                  absl::Span<const int64_t> shape, int64_t bytes) override;

  // Encodes the answer for `request`, once: `json` gets the JSON, `binary`
  // the binary blocks in output order (moved out; empty when every output is
  // JSON), each a byte tensor whose buffer big outputs reuse from
  // BufferCache::Global() (no fresh pages per call).
  // INVALID_ARGUMENT naming an output that cannot be JSON (BYTES that are
  // not UTF-8).
  absl::Status Encode(const JsonInferRequest& request, JsonText* json, std::vector<Tensor>* binary);

 private:
  struct Output {
    std::string name;
    std::string datatype;
    std::vector<int64_t> shape;
    Tensor data;  // UINT8 [bytes]: the raw output
  };
  std::string model_, version_, id_;
  std::vector<Output> outputs_;
};

// The HTTP status of an error (../shared/api-rest.md "Status codes"): 400
// for what a request got wrong, 401/403/404, 409 for a conflict (a shared
// memory region's name already registered), 413 for a size limit (a
// RESOURCE_EXHAUSTED naming its "(--max_..." flag, or a request larger than
// the whole in-flight budget: ErrorInfo REQUEST_OVER_INFLIGHT_BUDGET), 503
// for the in-flight budget busy, the queue and the drain, 504, 501; 500 only for INTERNAL,
// UNKNOWN and DATA_LOSS, which no request can cause (bugs).
int HttpStatusOf(const absl::Status& status);
// {"error": "<message>"}.
std::string ErrorJson(absl::string_view message);
// {"error": "<message>", "details": [...]}: the status's google.rpc details
// in proto3 JSON (wire/status_details.h StatusDetailsJson), an
// INVALID_ARGUMENT's BadRequest derived first; no "details" when none.
std::string ErrorJson(const absl::Status& status);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_JSON_BINDING_H_
