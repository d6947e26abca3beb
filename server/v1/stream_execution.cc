#include "server/v1/stream_execution.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/field_path.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "wire/attrs_codec.h"
#include "wire/chain_codec.h"
#include "wire/crc32.h"
#include "wire/tensor_codec.h"

namespace tensorops {
namespace {

std::string InputName(const OpDef& def, int i) {
  const auto& inputs = def.spec.inputs;
  return i < static_cast<int>(inputs.size())
             ? absl::StrCat("inputs[", i, "] ('", inputs[i].name, "')")
             : absl::StrCat("inputs[", i, "]");
}

std::string Hex32(uint32_t v) { return absl::StrFormat("0x%08x", v); }

absl::Status TooBig(const RequestLimits& limits, absl::string_view what, int64_t bytes,
                    absl::Span<const int64_t> dims, DType dtype) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "streamed call needs more than ", limits.max_stream_bytes, " bytes of inputs and output (",
      what, " is ", bytes, " bytes, shape ", ShapeToString(dims), " of ", DTypeName(dtype),
      "); the limit is ", limits.max_stream_bytes, " (--max_stream_bytes)"));
}

// Rows of a flow plan below this would make output chunks too small to be
// worth a message each (docs/server.md "Flowing streams").
constexpr int64_t kFlowMinRowBytes = 4096;

}  // namespace

// Output chunk buffers of one flowing stream, recycled: a stream allocates
// only the buffers its window holds in flight, once, instead of a buffer per
// chunk (a 16 GiB stream: 16384 of them) freed on whichever gRPC thread
// releases its slice, into that thread's malloc arena.
//
// Thread-safety: Get on the stream's thread, the buffers' release on any.
class StreamedExecution::BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  explicit BufferPool(int64_t size) : size_(size) {}
  std::shared_ptr<char> Get() {
    char* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        p = free_.back().release();
        free_.pop_back();
      }
    }
    if (p == nullptr) p = new char[size_];
    return std::shared_ptr<char>(p, [pool = shared_from_this()](char* q) { pool->Put(q); });
  }

 private:
  void Put(char* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace_back(p);
  }

  const int64_t size_;
  std::mutex mu_;
  std::vector<std::unique_ptr<char[]>> free_;
};

namespace {
// The largest flowing tensor: sums of a few of them stay in int64_t.
constexpr int64_t kMaxFlowBytes = int64_t{1} << 60;

}  // namespace

absl::Status StreamedExecution::InHeader(absl::Status status) const {
  // The kernels name op inputs; a stream's are its header's, their data the
  // chunks' (no field of the header holds an element).
  return MapErrorFieldPath(std::move(status), [this](absl::string_view path) {
    int64_t i = 0;
    absl::string_view rest;
    if (SplitIndexedPath(path, "inputs", &i, &rest)) {
      return absl::StrCat("header.inputs[", i, "]", ConsumeDataPath(&rest) ? "" : rest);
    }
    return absl::StrCat("header.", ExecuteFieldPath({}, chain_, path));
  });
}

absl::StatusOr<std::unique_ptr<StreamedExecution>> StreamedExecution::Begin(
    const OpRegistry& registry, const v1::StreamHeader& header, const RequestLimits& limits) {
  std::unique_ptr<StreamedExecution> s(new StreamedExecution());
  s->registry_ = &registry;
  s->limits_ = limits;
  s->attrs_ = DecodeAttrs(header.attrs());
  std::vector<TensorView> views;  // no data yet: only what the spec checks need
  int64_t total = 0;              // stays <= max_stream_bytes, so sums cannot overflow
  for (int i = 0; i < header.inputs_size(); ++i) {
    // A flowing stream's data never lies whole in memory: only the window
    // (and a layout buffered whole, checked when the plan declines it).
    const bool flowing_data = header.flow() && i == 0;
    RETURN_IF_ERROR(s->AddInput(header.inputs(i), i, flowing_data, &total, &views));
  }
  ASSIGN_OR_RETURN(s->def_, s->InHeader(registry.CheckCall(header.op(), views, s->attrs_)));
  // What the op will write, from its inference: reserved (and budgeted)
  // before a byte is uploaded.
  ASSIGN_OR_RETURN(std::vector<TensorType> outputs, s->InHeader(s->def_->infer(views, s->attrs_)));
  RETURN_IF_ERROR(s->InHeader(s->CheckChainSteps(header, outputs)));
  RETURN_IF_ERROR(s->AddOutput(outputs, header.flow(), &total));
  if (header.flow()) {
    s->flow_ = true;
    s->out_crc_ = std::make_unique<Crc32OfPieces>(s->output_bytes_);
    s->buffers_ = std::make_shared<BufferPool>(limits.stream_chunk_bytes);
    // An op with no small inputs (or only empty ones) is planned now.
    std::vector<OutputChunk> none;  // nothing is held yet
    RETURN_IF_ERROR(s->MaybePlan(&none));
  }
  return s;
}

absl::Status StreamedExecution::AddInput(const v1::TensorHeader& h, int i, bool flowing_data,
                                         int64_t* total, std::vector<TensorView>* views) {
  const std::string what = absl::StrCat("header.inputs[", i, "]");
  const DType dtype = FromProtoDataType(h.dtype());
  if (dtype == DType::kInvalid) {
    return InvalidArgumentAt(
        absl::StrCat(what, ".dtype"),
        absl::StrCat(what, ".dtype is ", static_cast<int>(h.dtype()), ", not an element type"));
  }
  if (dtype == DType::kString) {
    return InvalidArgumentAt(
        absl::StrCat(what, ".dtype"),
        absl::StrCat(what,
                     ".dtype is STRING, which has no fixed-width layout to stream; use Execute"));
  }
  if (h.shape_size() > limits_.max_rank) {
    return InvalidArgumentAt(absl::StrCat(what, ".shape"),
                             absl::StrCat(what, " has rank ", h.shape_size(), "; the limit is ",
                                          limits_.max_rank, " (--max_rank)"));
  }
  const absl::Span<const int64_t> dims(h.shape().data(), h.shape_size());
  ASSIGN_OR_RETURN(const int64_t bytes,
                   AtField(CheckedByteSize(dims, ElementWidth(dtype), absl::StrCat(what, ".shape")),
                           absl::StrCat(what, ".shape")));
  if (flowing_data ? bytes > kMaxFlowBytes : bytes > limits_.max_stream_bytes - *total) {
    return TooBig(limits_, what, bytes, dims, dtype);
  }
  if (!flowing_data) *total += bytes;
  input_bytes_ += bytes;
  Input in;
  in.dtype = dtype;
  in.shape.assign(dims.begin(), dims.end());
  in.bytes = bytes;
  in.expected_crc = h.crc32();
  views->push_back(TensorView{dtype, in.shape, nullptr});
  inputs_.push_back(std::move(in));
  return absl::OkStatus();
}

// A chain's steps come whole in the header: each is checked now, before the
// upload, with the first op's output as its first input. A chain keeps the
// type and shape, so the output AddOutput sizes is the chain's.
absl::Status StreamedExecution::CheckChainSteps(const v1::StreamHeader& header,
                                                const std::vector<TensorType>& outputs) {
  if (header.then_size() == 0) return absl::OkStatus();
  chain_ = header.then();
  int64_t step_bytes = 0;
  ASSIGN_OR_RETURN(steps_, DecodeChain(chain_, limits_, &step_bytes, &chain_inputs_));
  if (outputs.size() == 1) {
    RETURN_IF_ERROR(registry_->CheckChain(outputs[0], steps_, &chain_ops_).status());
  }
  return absl::OkStatus();
}

absl::Status StreamedExecution::AddOutput(const std::vector<TensorType>& outputs, bool flow,
                                          int64_t* total) {
  if (outputs.size() != 1) {
    return absl::UnimplementedError(
        absl::StrCat(def_->spec.name, " has ", outputs.size(),
                     " outputs; ExecuteStream sends exactly one (use Execute)"));
  }
  const std::string what = "output[0]";
  ASSIGN_OR_RETURN(const int64_t bytes,
                   CheckedByteSize(outputs[0].shape, ElementWidth(outputs[0].dtype), what));
  if (flow ? bytes > kMaxFlowBytes : bytes > limits_.max_stream_bytes - *total) {
    return TooBig(limits_, what, bytes, outputs[0].shape, outputs[0].dtype);
  }
  if (!flow) *total += bytes;
  output_bytes_ += bytes;
  out_dtype_ = outputs[0].dtype;
  out_shape_ = outputs[0].shape;
  return absl::OkStatus();
}

int64_t StreamedExecution::budget_bytes() const {
  if (!flow_ || buffered_) return input_bytes_ + output_bytes_;
  // A stream smaller than its window holds no more than a non-flowing one.
  const int64_t data = inputs_[0].bytes;
  return std::min(limits_.stream_window_bytes, data + output_bytes_) + (input_bytes_ - data);
}

uint32_t StreamedExecution::flow_output_crc() const {
  return buffered_ ? output_crc_ : out_crc_->Value();
}

absl::Status StreamedExecution::AddChunk(const v1::TensorChunk& chunk) {
  const absl::string_view data = chunk.data();
  return AddChunk(chunk.tensor(), chunk.offset(), absl::MakeConstSpan(&data, 1));
}

absl::Status StreamedExecution::AddChunk(uint32_t tensor, uint64_t offset,
                                         absl::Span<const absl::string_view> pieces) {
  std::vector<OutputChunk> unsent;  // a caller of this form does not send a flowing output
  return AddChunk(tensor, offset, pieces, 0, &unsent);
}

absl::Status StreamedExecution::CheckChunk(int i, uint64_t offset, int64_t n,
                                           absl::Span<const absl::string_view> pieces) const {
  const Input& in = inputs_[i];
  if (n == 0) {
    return InvalidArgumentAt(
        "chunk.data", absl::StrCat("empty chunk for ", InputName(*def_, i), " at offset ", offset));
  }
  if (n > limits_.stream_chunk_bytes) {
    return InvalidArgumentAt(
        "chunk.data",
        absl::StrCat("chunk of ", n, " bytes for ", InputName(*def_, i), " exceeds the limit of ",
                     limits_.stream_chunk_bytes, " bytes (--stream_chunk_bytes)"));
  }
  if (offset != static_cast<uint64_t>(in.received)) {
    return InvalidArgumentAt(
        "chunk.offset",
        absl::StrCat("chunk for ", InputName(*def_, i), " at offset ", offset, ", expected offset ",
                     in.received,
                     ": each input's chunks must come in order, without gaps or repeats"));
  }
  if (n > in.bytes - in.received) {
    return InvalidArgumentAt(
        "chunk.data", absl::StrCat("chunk for ", InputName(*def_, i), " runs past its end: offset ",
                                   in.received, " + ", n, " bytes > ", in.bytes, " bytes (shape ",
                                   ShapeToString(in.shape), " of ", DTypeName(in.dtype), ")"));
  }
  if (in.dtype == DType::kBool) {
    // As Execute: a BOOL is one byte, 0 or 1 (kernels and readers rely on it).
    int64_t at = in.received;
    for (absl::string_view p : pieces) {
      if (const int64_t k = FindInvalidBool(p); k >= 0) {
        return InvalidArgumentAt("chunk.data", absl::StrCat(InputName(*def_, i), " byte ", at + k,
                                                            " = ", int{static_cast<uint8_t>(p[k])},
                                                            " is not a valid BOOL (0 or 1)"));
      }
      at += static_cast<int64_t>(p.size());
    }
  }
  return absl::OkStatus();
}

absl::Status StreamedExecution::AddChunk(uint32_t tensor, uint64_t offset,
                                         absl::Span<const absl::string_view> pieces,
                                         uint32_t chunk_crc, std::vector<OutputChunk>* out) {
  const int64_t num_inputs = static_cast<int64_t>(inputs_.size());
  if (tensor >= num_inputs) {
    return InvalidArgumentAt(
        "chunk.tensor",
        absl::StrCat("chunk.tensor is ", tensor, " but the header has ", num_inputs, " inputs"));
  }
  const int i = static_cast<int>(tensor);
  Input& in = inputs_[i];
  int64_t n = 0;
  for (absl::string_view p : pieces) n += static_cast<int64_t>(p.size());
  RETURN_IF_ERROR(CheckChunk(i, offset, n, pieces));
  // A flowing stream's data is held only until its blocks move out.
  bool hold = flow_ && i == 0 && !buffered_;
  if (hold && !planned_ &&
      static_cast<int64_t>(staging_.size()) + n > limits_.stream_window_bytes) {
    // The data came before the small inputs, past the window: the contract
    // (../shared/api.md, "Streams that flow") says that only delays the
    // first output, so the call is kept whole instead, as a layout that does
    // not flow, rather than refused (RESOURCE_EXHAUSTED would also invite a
    // retry that fails the same way).
    RETURN_IF_ERROR(BufferWhole(absl::StrCat(
        "its ", InputName(*def_, 0), " came before its other inputs, past --stream_window_bytes=",
        limits_.stream_window_bytes, " (send them first to flow)")));
    hold = false;
  }
  if (!hold && in.received == 0) in.tensor = Tensor(in.dtype, in.shape);
  char* dst = hold ? nullptr : static_cast<char*>(in.tensor.mutable_data()) + in.received;
  uint32_t crc = 0;  // this chunk's
  for (absl::string_view p : pieces) {
    crc = Crc32WhileCopying(crc, p, [&](const char* block, size_t k) {
      if (hold) {
        staging_.append(block, k);
      } else {
        std::memcpy(dst, block, k);
        dst += k;
      }
    });
  }
  if (chunk_crc != 0 && chunk_crc != crc) {
    return absl::DataLossError(absl::StrCat(
        "the chunk of ", InputName(*def_, i), " at offset ", offset, " is corrupt: it says CRC-32 ",
        Hex32(chunk_crc), ", its ", n, " bytes give ", Hex32(crc)));
  }
  in.crc = Crc32Combine(in.crc, crc, n);
  in.received += n;
  received_bytes_ += n;
  if (!flow_ || buffered_) return absl::OkStatus();
  if (!planned_) return MaybePlan(out);
  if (hold) MoveHeldBlocks(out);
  return absl::OkStatus();
}

absl::Status StreamedExecution::MaybePlan(std::vector<OutputChunk>* out) {
  for (int i = 1; i < static_cast<int>(inputs_.size()); ++i) {
    Input& in = inputs_[i];
    if (in.received < in.bytes) return absl::OkStatus();
    if (in.crc != in.expected_crc) {
      return absl::DataLossError(
          absl::StrCat(InputName(*def_, i), " is corrupt: its header says CRC-32 ",
                       Hex32(in.expected_crc), ", its ", in.bytes, " bytes give ", Hex32(in.crc)));
    }
    if (in.bytes == 0) in.tensor = Tensor(in.dtype, in.shape);  // no chunk allocated it
  }
  RETURN_IF_ERROR(MakePlan());
  planned_ = true;
  if (!buffered_) {
    MoveHeldBlocks(out);
    return absl::OkStatus();
  }
  return BufferWhole("this layout does not flow piecewise (docs/server.md \"Flowing streams\")");
}

absl::Status StreamedExecution::BufferWhole(absl::string_view why) {
  // What was held becomes the start of the whole input, within
  // --max_stream_bytes like any call that keeps its tensors.
  Input& data = inputs_[0];
  if (input_bytes_ + output_bytes_ > limits_.max_stream_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(why, ", so it is buffered whole: it needs ", input_bytes_ + output_bytes_,
                     " bytes of inputs and output (", InputName(*def_, 0), " is shape ",
                     ShapeToString(data.shape), " of ", DTypeName(data.dtype), "); the limit is ",
                     limits_.max_stream_bytes, " (--max_stream_bytes)"));
  }
  buffered_ = true;
  if (data.received > 0) {  // else its first chunk allocates it
    data.tensor = Tensor(data.dtype, data.shape);
    std::memcpy(data.tensor.mutable_data(), staging_.data(), staging_.size());
  }
  std::string().swap(staging_);
  return absl::OkStatus();
}

// The chain's movements, checked as Run's PrepareChain checks them (the
// same errors), and the flow plan over them.
absl::Status StreamedExecution::MakePlan() {
  const Input& data = inputs_[0];
  if (def_->movement == nullptr || data.bytes == 0) {
    buffered_ = data.bytes != 0;  // an op that is no movement runs whole
    return absl::OkStatus();
  }
  std::vector<TensorView> views;
  views.push_back(TensorView{data.dtype, data.shape, nullptr});
  for (size_t i = 1; i < inputs_.size(); ++i) views.push_back(inputs_[i].tensor.view());
  ASSIGN_OR_RETURN(Movement first, InHeader(def_->movement(views, attrs_)));
  std::vector<Movement> movements = {std::move(first)};
  if (!steps_.empty()) {
    ASSIGN_OR_RETURN(std::vector<Movement> rest,
                     InHeader(registry_->CheckChain(TensorType{data.dtype, data.shape}, steps_)));
    for (Movement& m : rest) movements.push_back(std::move(m));
  }
  plan_ = FlowPlan::Make(data.dtype, data.shape, movements, limits_.stream_chunk_bytes,
                         kFlowMinRowBytes);
  buffered_ = plan_ == nullptr;
  return absl::OkStatus();
}

void StreamedExecution::MoveHeldBlocks(std::vector<OutputChunk>* out) {
  if (plan_ == nullptr) return;  // an empty tensor
  const int64_t k = plan_->block_bytes();
  const int64_t blocks = static_cast<int64_t>(staging_.size()) / k;
  for (int64_t b = 0; b < blocks;) {
    // One row at a time: Map's runs stay inside a row.
    const int64_t first = staged_block_ + b;
    const int64_t row_end = (first / plan_->row_blocks() + 1) * plan_->row_blocks();
    const int64_t n = std::min(blocks - b, row_end - first);
    pieces_.clear();
    plan_->Map(first, n, &pieces_);
    for (const FlowPlan::Piece& p : pieces_) {
      EmitPiece(p, staging_.data() + (p.in_block - staged_block_) * k, out);
    }
    b += n;
  }
  // Keep the part block for the next chunk.
  staging_.erase(0, static_cast<size_t>(blocks * k));
  staged_block_ += blocks;
}

// A piece as output chunks of at most stream_chunk_bytes (whole blocks:
// a block is never larger), each moved, checksummed while in cache, and
// counted towards the trailer's CRC.
void StreamedExecution::EmitPiece(const FlowPlan::Piece& p, const char* in,
                                  std::vector<OutputChunk>* out) {
  const int64_t k = plan_->block_bytes();
  const int64_t per_chunk = std::max<int64_t>(1, limits_.stream_chunk_bytes / k);
  for (int64_t i = 0; i < p.count; i += per_chunk) {
    FlowPlan::Piece part = p;
    part.count = std::min(per_chunk, p.count - i);
    part.out_block = p.out_block + i;
    // Reversed: output block out_block + j reads input block in_block + count - 1 - j.
    part.in_block = p.reversed ? p.in_block + p.count - i - part.count : p.in_block + i;
    const int64_t bytes = part.count * k;
    std::shared_ptr<char> buffer = buffers_->Get();  // stream_chunk_bytes, >= bytes
    plan_->Move(part, in + (part.in_block - p.in_block) * k, buffer.get());
    OutputChunk chunk;
    chunk.offset = static_cast<uint64_t>(part.out_block * k);
    chunk.data = absl::string_view(buffer.get(), static_cast<size_t>(bytes));
    chunk.crc32 = Crc32(0, buffer.get(), bytes);
    chunk.owner = std::move(buffer);
    out_crc_->Add(static_cast<int64_t>(chunk.offset), bytes, chunk.crc32);
    sent_bytes_ += bytes;
    out->push_back(std::move(chunk));
  }
}

absl::Status StreamedExecution::EndOfInput() {
  for (int i = 0; i < static_cast<int>(inputs_.size()); ++i) {
    Input& in = inputs_[i];
    if (in.received < in.bytes) {
      return InvalidArgumentAt(
          absl::StrCat("header.inputs[", i, "]"),
          absl::StrCat("stream ended after ", in.received, " of ", in.bytes, " bytes of ",
                       InputName(*def_, i), " (shape ", ShapeToString(in.shape), " of ",
                       DTypeName(in.dtype), ")"));
    }
    if (in.crc != in.expected_crc) {
      return absl::DataLossError(
          absl::StrCat(InputName(*def_, i), " is corrupt: its header says CRC-32 ",
                       Hex32(in.expected_crc), ", its ", in.bytes, " bytes give ", Hex32(in.crc),
                       flow_ && !buffered_ ? "; the output already sent is void" : ""));
    }
    const bool held = flow_ && !buffered_ && i == 0;                     // moved out as it came
    if (in.bytes == 0 && !held) in.tensor = Tensor(in.dtype, in.shape);  // no chunk allocated it
  }
  return absl::OkStatus();
}

absl::Status StreamedExecution::Run(ThreadPool* pool, int64_t min_parallel_bytes) {
  if (flow_ && !buffered_) {
    // Its output left chunk by chunk in AddChunk; the data is not kept.
    return absl::FailedPreconditionError("a flowing call has no kernel to run after its input");
  }
  std::vector<TensorView> views;
  views.reserve(inputs_.size());
  for (const Input& in : inputs_) views.push_back(in.tensor.view());
  // Prepare checks the plan against the op's inference, which Begin budgeted.
  ASSIGN_OR_RETURN(PreparedOp op,
                   InHeader(registry_->PrepareChain(def_->spec.name, views, attrs_, steps_)));
  if (op.then.empty()) {
    output_ = std::make_shared<Tensor>(op.dtype, op.shape);
    RunPrepared(op, output_->mutable_data(), pool, min_parallel_bytes);
  } else {
    // A chain run in passes: only the first pass reads the data input
    // (the chain's type and shape), so the passes alternate between it and
    // one new tensor, and the chain costs no memory beyond its input and
    // output. With an even number of passes the last one lands in the input.
    Tensor& data = inputs_[0].tensor;
    Tensor other(op.dtype, op.shape);
    const bool even = (op.then.size() + 1) % 2 == 0;
    Tensor& out = even ? data : other;
    RunPrepared(op, out.mutable_data(), pool, min_parallel_bytes,
                (even ? other : data).mutable_data());
    output_ = std::make_shared<Tensor>(std::move(out));
  }
  inputs_.clear();  // the kernel's views die with `op` at return; nothing reads them after
  output_crc_ = Crc32(0, output_->data(), output_bytes_, pool);
  return absl::OkStatus();
}

void StreamedExecution::FillOutputHeader(v1::StreamOutputHeader* header) const {
  v1::TensorHeader* out = header->add_outputs();
  out->set_dtype(ToProtoDataType(out_dtype_));
  for (int64_t d : out_shape_) out->add_shape(d);
  out->set_crc32(flow_ ? 0 : output_crc_);  // flowing: the trailer has it
}

bool StreamedExecution::NextChunk(v1::TensorChunk* chunk) {
  uint64_t offset = 0;
  absl::string_view data;
  if (!NextChunk(&offset, &data)) return false;
  chunk->set_tensor(0);
  chunk->set_offset(offset);
  chunk->set_data(data.data(), data.size());
  return true;
}

bool StreamedExecution::NextChunk(uint64_t* offset, absl::string_view* data) {
  if (sent_bytes_ >= output_bytes_) return false;
  const int64_t n = std::min(limits_.stream_chunk_bytes, output_bytes_ - sent_bytes_);
  *offset = static_cast<uint64_t>(sent_bytes_);
  *data = absl::string_view(static_cast<const char*>(output_->data()) + sent_bytes_,
                            static_cast<size_t>(n));
  sent_bytes_ += n;
  return true;
}

}  // namespace tensorops
