// The Open Inference Protocol's gRPC binding: inference.ModelInferRequest ->
// InferRequest (views of the message: no tensor byte is copied; typed
// contents decode straight into kernel tensors), the OIP core's named outputs
// -> inference.ModelInferResponse, and ModelMetadata.
//
// Thread-safety: stateless functions; a ProtoInferRequest or
// ProtoInferResponse is used by one thread at a time.
#ifndef TENSOROPS_SERVER_GRPC_OIP_BINDING_H_
#define TENSOROPS_SERVER_GRPC_OIP_BINDING_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/core/call.h"
#include "server/grpc/raw_unary.h"
#include "server/oip/infer_request.h"
#include "server/oip/oip_codec.h"
#include "server/oip/shm_registry.h"
#include "wire/limits.h"

namespace tensorops {

// An InferRequest over a ModelInferRequest, which must outlive it (and, for
// its raw contents, the PreparedInfer made from it).
class ProtoInferRequest {
 public:
  explicit ProtoInferRequest(const inference::ModelInferRequest& message);
  ProtoInferRequest(const ProtoInferRequest&) = delete;
  ProtoInferRequest& operator=(const ProtoInferRequest&) = delete;

  const InferRequest& request() const { return request_; }

 private:
  InferRequest request_;
  std::vector<std::unique_ptr<TypedContents>> typed_;
};

// Writes the core's response into a ModelInferResponse: each output's data
// in raw_output_contents, written in place by the kernel.
class ProtoInferResponse final : public InferResponseWriter {
 public:
  explicit ProtoInferResponse(inference::ModelInferResponse* response) : response_(response) {}
  void SetModel(absl::string_view name, absl::string_view version, absl::string_view id) override;
  char* AddOutput(absl::string_view name, absl::string_view datatype,
                  absl::Span<const int64_t> shape, int64_t bytes) override;

 private:
  inference::ModelInferResponse* const response_;
};

// Writes the core's response as a reply's bytes (server/grpc/raw_unary.h):
// every field but the output bytes into `header` (encoded by protobuf), each
// output's data into a buffer of its own that goes out as a gRPC slice
// after it, as raw_output_contents (field 6, the message's last).
class SliceInferResponse final : public InferResponseWriter {
 public:
  explicit SliceInferResponse(inference::ModelInferResponse* header) : header_(header) {}
  void SetModel(absl::string_view name, absl::string_view version, absl::string_view id) override;
  char* AddOutput(absl::string_view name, absl::string_view datatype,
                  absl::Span<const int64_t> shape, int64_t bytes) override;
  // The reply, byte for byte what protobuf writes for the whole message.
  void Encode(grpc::ByteBuffer* reply);

 private:
  inference::ModelInferResponse* const header_;
  std::vector<SliceBuffer> outputs_;
};

// PreparedInfer::Make of the message's InferRequest.
absl::StatusOr<std::unique_ptr<PreparedInfer>> PrepareModelInfer(
    const OpRegistry& registry, const inference::ModelInferRequest& request,
    const RequestLimits& limits, const ShmRegistry* shm, const std::string& owner);
// PreparedInfer::Run into `response`.
absl::Status RunModelInfer(PreparedInfer& prepared, inference::ModelInferResponse* response,
                           ThreadPool* pool = nullptr,
                           int64_t min_parallel_bytes = int64_t{1} << 20);
// The prepared call of a ModelInfer (Call::RunUnary): runs into `response`,
// which must outlive it.
std::unique_ptr<PreparedCall> ModelInferCall(std::unique_ptr<PreparedInfer> prepared,
                                             inference::ModelInferResponse* response);

// The prepared call of a unary ModelInfer whose reply goes out as bytes
// (server/grpc/raw_unary.h): outputs of kSliceReplyMinBytes or more as
// SliceInferResponse's slices, smaller ones through `response` and gRPC's
// serialiser. `response` and `reply` must outlive it.
std::unique_ptr<PreparedCall> ModelInferReplyCall(std::unique_ptr<PreparedInfer> prepared,
                                                  inference::ModelInferResponse* response,
                                                  grpc::ByteBuffer* reply);

// Fills ModelMetadata for `def`: inputs and outputs with the spec's names, a
// representative datatype (RepresentativeDatatype) and shape (-1 per
// dimension when the rank is fixed, else [-1]: any rank).
void DescribeModel(const OpDef& def, inference::ModelMetadataResponse* response);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_OIP_BINDING_H_
