// The request path of ExecuteStream below the RPC layer: a call whose tensors
// arrive and leave in chunks (tensors too big for one message).
//
//   Begin(header)   validates everything that does not need the data (op,
//                   attrs names, input count, types, ranks, sizes, limits;
//                   a chain's steps, whose inputs come in the header)
//                   before a byte is allocated or uploaded;
//   AddChunk()...   copies each chunk into its input, in order, updating the
//                   input's CRC-32;
//   EndOfInput()    checks that every input is complete and its CRC matches;
//   Run()           the op's own validation and the kernel, into the output;
//   output header + NextChunk()...  the result, in chunks.
//
// Memory: the inputs and the output, nothing else (inputs are freed when Run
// finishes); budget_bytes() is what admission control reserves for it.
//
// Thread-safety: none; one call at a time (the RPC serialises them).
#ifndef TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_
#define TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/op_registry.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/limits.h"
#include "wire/tensor_codec.h"

namespace tensorops {

class StreamedExecution {
 public:
  // Validates the header against `limits` (max_rank, max_stream_bytes,
  // stream_chunk_bytes) and sizes the output by the op's inference (OpDef::
  // infer); allocates nothing. `registry` must outlive the execution. Unknown op: UNIMPLEMENTED;
  // bad header: INVALID_ARGUMENT; too big: RESOURCE_EXHAUSTED (naming the flag).
  static absl::StatusOr<std::unique_ptr<StreamedExecution>> Begin(const OpRegistry& registry,
                                                                  const v1::StreamHeader& header,
                                                                  const RequestLimits& limits);

  // Canonical op name (for metrics and logs).
  const std::string& op_name() const { return def_->spec.name; }
  // A chain's ops after the first (for metrics), known from Begin.
  absl::Span<const OpDef* const> chain() const { return chain_ops_; }
  // Bytes of all inputs plus the output: what the call holds at its peak.
  int64_t budget_bytes() const { return input_bytes_ + output_bytes_; }
  int64_t input_bytes() const { return input_bytes_; }
  int64_t output_bytes() const { return output_bytes_; }
  // Input bytes received so far.
  int64_t received_bytes() const { return received_bytes_; }

  // Places one chunk. INVALID_ARGUMENT (naming the input and the offsets)
  // for an unknown tensor index, an empty or oversize chunk, an offset other
  // than the bytes of that input received so far, or data past its end.
  // The first chunk of an input allocates it.
  absl::Status AddChunk(const v1::TensorChunk& chunk);
  // The same for a chunk whose `data` lies in pieces (views of the received
  // slices, wire/stream_chunk.h): each piece is copied into the input and
  // its CRC taken while the bytes are still in cache.
  absl::Status AddChunk(uint32_t tensor, uint64_t offset,
                        absl::Span<const absl::string_view> pieces);

  // The client closed its side: INVALID_ARGUMENT if an input is short,
  // DATA_LOSS if an input's CRC-32 differs from its header's.
  absl::Status EndOfInput();

  // The op's validation and its kernel (split across `pool` from
  // `min_parallel_bytes` of output), then the output's CRC-32. Frees the inputs.
  absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes);

  // After Run: the output's description.
  void FillOutputHeader(v1::StreamOutputHeader* header) const;
  // After Run: the next chunk of the output (at most stream_chunk_bytes); false once
  // every byte has been handed out.
  bool NextChunk(v1::TensorChunk* chunk);
  // The same without a copy: `*data` views the output's memory, which
  // output_owner() keeps alive (for slices that outlive this object).
  bool NextChunk(uint64_t* offset, absl::string_view* data);
  std::shared_ptr<const void> output_owner() const { return output_; }

 private:
  struct Input {
    DType dtype = DType::kInvalid;
    Shape shape;
    int64_t bytes = 0;
    uint32_t expected_crc = 0;
    uint32_t crc = 0;
    int64_t received = 0;
    Tensor tensor;  // allocated with the first chunk
  };

  StreamedExecution() = default;

  const OpRegistry* registry_ = nullptr;
  const OpDef* def_ = nullptr;
  Attrs attrs_;
  // A chain's steps (the header's copy; their inputs decoded from it).
  google::protobuf::RepeatedPtrField<v1::Step> chain_;
  std::vector<DecodedTensor> chain_inputs_;
  std::vector<ChainStep> steps_;
  std::vector<const OpDef*> chain_ops_;
  RequestLimits limits_;
  std::vector<Input> inputs_;
  int64_t input_bytes_ = 0;
  int64_t output_bytes_ = 0;
  int64_t received_bytes_ = 0;
  std::shared_ptr<Tensor> output_;  // shared with the output chunks' slices
  uint32_t output_crc_ = 0;
  int64_t sent_bytes_ = 0;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_
