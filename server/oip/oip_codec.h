// The Open Inference Protocol (KServe v2) core, below any wire format: ops
// as models, and an InferRequest (server/oip/infer_request.h, filled by a
// binding from its message) -> the same kernel inputs and attributes Execute
// builds -> named outputs written through an InferResponseWriter.
//
// The mapping (docs/cookbook.md "Triton / KServe clients"):
//  - every op is a model of its name, version "1" ("" means the same);
//  - inputs are matched to the op spec's input names in any order; their data
//    comes typed (`contents`), raw (`raw_input_contents`, one entry per input
//    not in shared memory, in request order) or from a registered shared
//    memory region; FP16/BF16 raw only; BYTES is our STRING (raw: 4-byte
//    little-endian length + bytes per element);
//  - request parameters are op attributes (`mode` as string_param, integer
//    attributes as int64_param) checked exactly as Execute's attrs; the
//    protocol's own parameters (kProtocolParameters) are not attributes;
//  - a chain (../shared/api.md "Chains") is the model's op followed by the
//    steps of the `then` request parameter: a string holding a JSON array of
//    tensorops.v1.Step objects (proto3 JSON); the output keeps the model's
//    output name (docs/cookbook.md "Chains");
//  - outputs come back in raw_output_contents (or are written to shared memory).
// Every check of Execute applies (limits, sizes against shapes, overflow,
// BOOL bytes) and every error names the tensor or parameter.
//
// Thread-safety: free functions are stateless; a PreparedInfer is used by one
// thread at a time.
#ifndef TENSOROPS_SERVER_OIP_OIP_CODEC_H_
#define TENSOROPS_SERVER_OIP_OIP_CODEC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/oip/infer_request.h"
#include "server/oip/shm_registry.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/dtypes.h"
#include "wire/limits.h"
#include "wire/tensor_codec.h"

namespace tensorops {

// Request parameters that belong to the protocol, not to an op. `timeout`
// (microseconds, 0 = none) drops a call still queued past it, as an RPC
// deadline does; `priority` is checked (an integer >= 0) and, like the
// sequence parameters, has no effect (one queue, no sequences).
extern const char* const kProtocolParameters[7];

// The request parameter that makes a call a chain (see the file comment).
inline constexpr char kChainParameter[] = "then";

// The version every model has.
inline constexpr char kModelVersion[] = "1";

// The op a model name and version name: NOT_FOUND naming them and listing
// what exists when there is none.
absl::StatusOr<const OpDef*> FindModel(const OpRegistry& registry, absl::string_view name,
                                       absl::string_view version);

// Rank, element count and byte limits of a tensor, before anything is read
// or allocated; returns its bytes (elements x width). The checks and messages
// of DecodeTensor. `string_chars` >= 0: a STRING tensor given as elements
// with that many characters, which count against --max_tensor_bytes ("N+
// bytes" when over); -1: raw form (its characters are counted once parsed).
absl::StatusOr<int64_t> CheckShape(DType dtype, absl::Span<const int64_t> dims,
                                   absl::string_view what, const RequestLimits& limits,
                                   int64_t string_chars = -1);

// The datatype a model's metadata shows for a tensor that takes `types`:
// FP32 when allowed, else INT64, else the first the protocol can name.
const char* RepresentativeDatatype(const std::vector<DType>& types);

// A validated ModelInfer call, ready to run. Holds views into the request
// (which must outlive it) and references to the shared-memory regions it
// uses (kept mapped until it is destroyed).
class PreparedInfer {
 public:
  // Decodes and validates everything, like PreparedExecution::Make, plus the
  // protocol's rules. `shm` may be null (shared memory off); `owner` is the
  // caller's identity for shared-memory regions (its bearer token, or "").
  static absl::StatusOr<std::unique_ptr<PreparedInfer>> Make(const OpRegistry& registry,
                                                             const InferRequest& request,
                                                             const RequestLimits& limits,
                                                             const ShmRegistry* shm,
                                                             const std::string& owner);

  const OpDef& op() const { return *def_; }
  // Output bytes the kernel writes (for admission and limits).
  int64_t output_bytes() const { return op_.output_bytes(); }
  // Bytes a chain run in passes needs besides (for admission).
  int64_t scratch_bytes() const { return op_.scratch_bytes(); }
  // The ops after the model's own (the `then` parameter; empty without one).
  absl::Span<const OpDef* const> chain() const { return op_.chain; }
  // Bytes of the decoded inputs.
  int64_t input_bytes() const { return input_bytes_; }
  // The request's `timeout` parameter (microseconds after arrival by which
  // the kernel must start, as Triton's), or InfiniteDuration without one.
  absl::Duration timeout() const { return timeout_; }

  // Runs the kernel and writes the response (model name and version, id,
  // named outputs). Fails only with shared memory: a region whose object
  // shrank since the request was checked (INVALID_ARGUMENT naming the region).
  absl::Status Run(InferResponseWriter* response, ThreadPool* pool = nullptr,
                   int64_t min_parallel_bytes = int64_t{1} << 20);

 private:
  struct ShmUse {
    std::shared_ptr<const ShmRegion> region;
    uint64_t offset = 0;
    uint64_t byte_size = 0;
  };
  struct Output {
    int spec_index = 0;
    int request_index = -1;  // in request.outputs; -1 when none were named
    bool in_shm = false;
    ShmUse shm;
  };

  // Where one request input's data is: a shared-memory range, an entry of
  // raw_input_contents (raw_index), or else its typed contents.
  struct InputSource {
    ShmUse shm;
    int raw_index = -1;
  };

  PreparedInfer() = default;
  // Make's steps, in order, each with its own errors (the messages name the
  // input, output or parameter). Inputs by name: slot[spec index] = request
  // index; every spec input exactly once.
  static absl::StatusOr<std::vector<int>> MatchInputs(const OpSpec& spec,
                                                      const InferRequest& request);
  // Where each input's data is: shared memory, raw (in request order,
  // skipping shared-memory inputs, as Triton does) or typed.
  static absl::Status LocateInputs(const InferRequest& request, const ShmRegistry* shm,
                                   const std::string& owner, std::vector<InputSource>* sources);
  // Request input i decoded into inputs_ (is_data: the op's first input, which
  // the kernel may read in place from shared memory), its bytes counted.
  absl::Status DecodeInput(const InferRequest& request, int i, bool is_data,
                           const InputSource& source, const RequestLimits& limits);
  absl::StatusOr<DecodedTensor> DecodeShmInput(const InferInput& in, DType dtype, bool is_data,
                                               const ShmUse& use, const std::string& what,
                                               const RequestLimits& limits);
  static absl::StatusOr<DecodedTensor> DecodeContents(const InferInput& in, DType dtype,
                                                      const std::string& what,
                                                      const RequestLimits& limits);
  // An error's field path from the kernels' op vocabulary onto the
  // request's own fields: the op's inputs[s] is the request's
  // inputs[slot[s]] (.dtype its .datatype; .data its
  // parameters.shared_memory_region when it is there, else .data[k] for the
  // door to name: raw_input_contents, contents, JSON data or a binary
  // block); attrs.x is parameters.x, then... is parameters.then...
  std::string RequestFieldPath(const std::vector<int>& slot,
                               const std::vector<InputSource>& sources,
                               absl::string_view op_path) const;
  // The `then` parameter's steps (a chain after this model's op), if any.
  absl::StatusOr<std::vector<ChainStep>> DecodeChainParameter(const InferRequest& request,
                                                              const RequestLimits& limits);
  // outputs_: all in spec order, or those requested, in request order, with
  // their shared-memory ranges checked against the output and the data input.
  absl::Status SelectOutputs(const InferRequest& request, const ShmRegistry* shm,
                             const std::string& owner);
  // Runs op_ into `out`; under the SIGBUS guard when shared memory is involved.
  absl::Status RunKernel(void* out, ThreadPool* pool, int64_t min_parallel_bytes);

  const OpDef* def_ = nullptr;
  std::string id_;
  std::vector<DecodedTensor> inputs_;  // in the spec's order
  // Copies of shared-memory inputs read by validation (STRING elements
  // point into them).
  std::vector<std::unique_ptr<std::string>> shm_copies_;
  // Shared-memory inputs and outputs in use; the data input's ShmUse, if it
  // is read in place (then the kernel runs under the SIGBUS guard).
  std::vector<ShmUse> shm_inputs_;
  bool data_in_shm_ = false;
  std::vector<Output> outputs_;
  // A chain's steps (the `then` parameter) and their decoded inputs.
  std::unique_ptr<google::protobuf::RepeatedPtrField<v1::Step>> chain_;
  std::vector<DecodedTensor> chain_inputs_;
  PreparedOp op_;
  int64_t input_bytes_ = 0;
  absl::Duration timeout_ = absl::InfiniteDuration();
};

// Parses raw BYTES: `n` elements, each a 4-byte little-endian length and that
// many bytes, back to back, nothing after. `out` gets n StringRefs into `raw`.
// INVALID_ARGUMENT naming `what` and the element for a cut-off prefix or
// element, or bytes left over.
absl::Status ParseRawBytes(absl::string_view raw, int64_t n, absl::string_view what,
                           StringRef* out);
// The raw form of STRING elements (for outputs): the size, then the bytes.
int64_t RawBytesSize(const TensorView& t);
void WriteRawBytes(const TensorView& t, char* out);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_OIP_OIP_CODEC_H_
