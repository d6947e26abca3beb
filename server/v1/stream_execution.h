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
// With StreamHeader.flow the output leaves while the input arrives: the
// small inputs (shift, axes, lengths) are kept whole; once they are all in,
// the chain's movements give a FlowPlan (kernels/chain_plan.h) and each data
// chunk is moved, block by block, into output chunks that AddChunk hands
// back with their offsets and CRC-32s; the data is never whole in memory.
// What is held at once (held_bytes(): data waiting for a whole block, or for
// the small inputs) stays within --stream_window_bytes, which is what
// budget_bytes() counts, with the output chunks the door has not sent yet.
// A layout the plan declines (tiny output pieces: time-major ReverseSequence
// over short rows, a ReverseSequence whose batch axis is the last dim), or
// data that passes the window before the small inputs are in, is buffered
// instead: buffered() turns true, budget_bytes() grows to the
// non-flowing budget (the door admits it again), and the call runs as a
// non-flowing one whose chunks the door sends with CRCs.
//
// Thread-safety: none; one call at a time (the RPC serialises them).
#ifndef TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_
#define TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/chain_plan.h"
#include "kernels/op_registry.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/crc32.h"
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

  // One output chunk of a flowing stream: `data` views memory that `owner`
  // keeps alive; `crc32` is its CRC-32.
  struct OutputChunk {
    uint64_t offset = 0;
    absl::string_view data;
    std::shared_ptr<const void> owner;
    uint32_t crc32 = 0;
  };

  // Canonical op name (for metrics and logs).
  const std::string& op_name() const { return def_->spec.name; }
  // A chain's ops after the first (for metrics), known from Begin.
  absl::Span<const OpDef* const> chain() const { return chain_ops_; }
  // What the call holds at its peak: all inputs plus the output, or, flowing,
  // the window plus the small inputs (until buffered()).
  int64_t budget_bytes() const;
  // StreamHeader.flow.
  bool flow() const { return flow_; }
  // Flowing, but buffered whole: the layout's pieces are tiny, or the data
  // passed the window before the small inputs.
  bool buffered() const { return buffered_; }
  // Flowing: input bytes held, waiting for a whole block or the small inputs.
  int64_t held_bytes() const { return static_cast<int64_t>(staging_.size()); }
  // Flowing: the output's CRC-32 once every chunk was handed out (the
  // trailer's).
  uint32_t flow_output_crc() const;
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
  // The same with the chunk's own CRC-32 (`chunk_crc`, checked when not 0:
  // DATA_LOSS). Flowing, appends the output chunks the input made ready to
  // `out` (may be null when not flowing); a flowing stream whose data passes
  // --stream_window_bytes before the small inputs are in is buffered whole
  // from then on (buffered() turns true; RESOURCE_EXHAUSTED past
  // --max_stream_bytes).
  absl::Status AddChunk(uint32_t tensor, uint64_t offset,
                        absl::Span<const absl::string_view> pieces, uint32_t chunk_crc,
                        std::vector<OutputChunk>* out);

  // The client closed its side: INVALID_ARGUMENT if an input is short,
  // DATA_LOSS if an input's CRC-32 differs from its header's.
  absl::Status EndOfInput();

  // The op's validation and its kernel (split across `pool` from
  // `min_parallel_bytes` of output), then the output's CRC-32. Frees the inputs.
  // Not for a flowing call unless buffered() (FAILED_PRECONDITION).
  absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes);

  // After Run (flowing: after Begin): the output's description (flowing: CRC 0).
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

  // Begin's steps. `total` counts the bytes held whole (inputs and output,
  // not a flowing stream's data), within --max_stream_bytes.
  absl::Status AddInput(const v1::TensorHeader& h, int i, bool flowing_data, int64_t* total,
                        std::vector<TensorView>* views);
  absl::Status CheckChainSteps(const v1::StreamHeader& header,
                               const std::vector<TensorType>& outputs);
  // An error's field path from the kernels' op vocabulary onto the
  // ExecuteStreamRequest's own fields (header.inputs[i], header.attrs.x,
  // header.then[s]...).
  absl::Status InHeader(absl::Status status) const;
  template <typename T>
  absl::StatusOr<T> InHeader(absl::StatusOr<T> value) const {
    if (value.ok()) return value;
    return InHeader(std::move(value).status());
  }
  absl::Status AddOutput(const std::vector<TensorType>& outputs, bool flow, int64_t* total);

  absl::Status CheckChunk(int i, uint64_t offset, int64_t n,
                          absl::Span<const absl::string_view> pieces) const;
  // Flowing: once every small input is in (and its CRC right), the plan,
  // and the data held so far moved out.
  absl::Status MaybePlan(std::vector<OutputChunk>* out);
  // Flowing, from now on kept whole (`why`: for the error past
  // --max_stream_bytes); what was held becomes the start of the data input.
  absl::Status BufferWhole(absl::string_view why);
  absl::Status MakePlan();
  // Flowing: the held data's whole blocks moved into output chunks.
  void MoveHeldBlocks(std::vector<OutputChunk>* out);
  void EmitPiece(const FlowPlan::Piece& p, const char* in, std::vector<OutputChunk>* out);

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

  // Flowing (StreamHeader.flow).
  bool flow_ = false;
  bool planned_ = false;   // the small inputs are in: plan_ made (or buffered_)
  bool buffered_ = false;  // the plan declined: kept whole, run as a non-flowing call
  DType out_dtype_ = DType::kInvalid;
  Shape out_shape_;
  std::unique_ptr<FlowPlan> plan_;
  std::string staging_;                  // data bytes from input block staged_block_ on
  int64_t staged_block_ = 0;             // the input block staging_ starts at
  std::vector<FlowPlan::Piece> pieces_;  // scratch for plan_->Map
  std::unique_ptr<Crc32OfPieces> out_crc_;
  class BufferPool;
  std::shared_ptr<BufferPool> buffers_;  // shared with the chunks in flight
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_V1_STREAM_EXECUTION_H_
