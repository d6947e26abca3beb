// The Open Inference Protocol's inference request and response as plain
// values, independent of any wire format: what a binding (the gRPC one,
// server/grpc/oip_binding.h; an HTTP/JSON one next) fills from its message
// and what the OIP core (server/oip/oip_codec.h) maps onto an op.
//
// An InferRequest holds views: of names, shapes and raw tensor bytes in the
// binding's message (no tensor byte is copied) and of typed elements behind
// a TypedContents the binding implements. Everything it points to must
// outlive PreparedInfer::Make; raw bytes must outlive the PreparedInfer.
//
// Thread-safety: plain values; a writer is used by one thread at a time.
#ifndef TENSOROPS_SERVER_OIP_INFER_REQUEST_H_
#define TENSOROPS_SERVER_OIP_INFER_REQUEST_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/dtype.h"
#include "wire/limits.h"
#include "wire/tensor_codec.h"

namespace tensorops {

// One parameter value (request, input or requested-output parameters).
struct InferParam {
  enum class Kind { kNone, kBool, kInt64, kUint64, kDouble, kString };
  Kind kind = Kind::kNone;
  bool bool_value = false;
  int64_t int64_value = 0;
  uint64_t uint64_value = 0;
  double double_value = 0;
  absl::string_view string_value;
};
// In the order the binding found them (error messages name the first bad one).
using InferParams = std::vector<std::pair<absl::string_view, InferParam>>;

// An input's elements in the binding's typed form (the gRPC binding's
// InferTensorContents, JSON arrays later), decoded straight into a kernel tensor.
class TypedContents {
 public:
  virtual ~TypedContents() = default;
  // A tensor of `dtype` and `dims` from these elements: the shape and
  // `limits` checks of DecodeTensor (rank, elements, bytes), then which
  // field carries them, their count and value ranges; every message starts
  // with `what` and names the binding's fields. Elements of STRING may point
  // into the binding's message.
  virtual absl::StatusOr<DecodedTensor> Decode(DType dtype, absl::Span<const int64_t> dims,
                                               absl::string_view what,
                                               const RequestLimits& limits) const = 0;
};

struct InferInput {
  absl::string_view name;
  absl::string_view datatype;  // the protocol's datatype string ("FP32")
  absl::Span<const int64_t> shape;
  InferParams parameters;  // shared_memory_region, _byte_size, _offset
  // Typed elements, when the input carries any (else null).
  const TypedContents* typed = nullptr;
};

struct InferRequestedOutput {
  absl::string_view name;
  InferParams parameters;  // shared memory, as for inputs
};

struct InferRequest {
  absl::string_view model_name;
  absl::string_view model_version;
  absl::string_view id;
  InferParams parameters;  // op attributes, and the protocol's own (ignored)
  std::vector<InferInput> inputs;
  std::vector<InferRequestedOutput> outputs;  // empty: every output
  // Raw input data: one entry per input not in shared memory, in the order of
  // `inputs` (empty when the inputs are typed).
  std::vector<absl::string_view> raw_inputs;
};

// Where the core writes the response. Outputs are added in response order.
class InferResponseWriter {
 public:
  virtual ~InferResponseWriter() = default;
  virtual void SetModel(absl::string_view name, absl::string_view version,
                        absl::string_view id) = 0;
  // Adds output `name` and returns a buffer for its `bytes` bytes of raw data
  // (little-endian, row-major; BYTES as length-prefixed elements). An output
  // written to shared memory is added with 0 bytes.
  virtual char* AddOutput(absl::string_view name, absl::string_view datatype,
                          absl::Span<const int64_t> shape, int64_t bytes) = 0;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_OIP_INFER_REQUEST_H_
