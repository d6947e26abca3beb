#include "server/v1/stream_execution.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<StreamedExecution>> StreamedExecution::Begin(
    const OpRegistry& registry, const v1::StreamHeader& header, const RequestLimits& limits) {
  std::unique_ptr<StreamedExecution> s(new StreamedExecution());
  s->registry_ = &registry;
  s->limits_ = limits;
  s->attrs_ = DecodeAttrs(header.attrs());
  std::vector<TensorView> views;  // no data yet: only what the spec checks need
  int64_t total = 0;              // stays <= max_stream_bytes, so sums cannot overflow
  for (int i = 0; i < header.inputs_size(); ++i) {
    const v1::TensorHeader& h = header.inputs(i);
    const std::string what = absl::StrCat("header.inputs[", i, "]");
    const DType dtype = FromProtoDataType(h.dtype());
    if (dtype == DType::kInvalid) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ".dtype is ", static_cast<int>(h.dtype()), ", not an element type"));
    }
    if (dtype == DType::kString) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ".dtype is STRING, which has no fixed-width layout to stream; use Execute"));
    }
    if (h.shape_size() > limits.max_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has rank ", h.shape_size(), "; the limit is ", limits.max_rank, " (--max_rank)"));
    }
    const absl::Span<const int64_t> dims(h.shape().data(), h.shape_size());
    ASSIGN_OR_RETURN(const int64_t bytes,
                     CheckedByteSize(dims, ElementWidth(dtype), absl::StrCat(what, ".shape")));
    if (bytes > limits.max_stream_bytes - total) {
      return TooBig(limits, what, bytes, dims, dtype);
    }
    total += bytes;
    s->input_bytes_ += bytes;
    Input in;
    in.dtype = dtype;
    in.shape.assign(dims.begin(), dims.end());
    in.bytes = bytes;
    in.expected_crc = h.crc32();
    views.push_back(TensorView{dtype, in.shape, nullptr});
    s->inputs_.push_back(std::move(in));
  }
  ASSIGN_OR_RETURN(s->def_, registry.CheckCall(header.op(), views, s->attrs_));
  // What the op will write, from its inference: reserved (and budgeted)
  // before a byte is uploaded.
  ASSIGN_OR_RETURN(std::vector<TensorType> outputs, s->def_->infer(views, s->attrs_));
  // A chain's steps come whole in the header: each is checked now, before
  // the upload, with the first op's output as its first input. A chain
  // keeps the type and shape, so the output below is the chain's.
  if (header.then_size() > 0) {
    s->chain_ = header.then();
    int64_t step_bytes = 0;
    ASSIGN_OR_RETURN(s->steps_, DecodeChain(s->chain_, limits, &step_bytes, &s->chain_inputs_));
    if (outputs.size() == 1) {
      RETURN_IF_ERROR(registry.CheckChain(outputs[0], s->steps_, &s->chain_ops_).status());
    }
  }
  if (outputs.size() != 1) {
    return absl::UnimplementedError(
        absl::StrCat(s->def_->spec.name, " has ", outputs.size(),
                     " outputs; ExecuteStream sends exactly one (use Execute)"));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const std::string what = absl::StrCat("output[", o, "]");
    ASSIGN_OR_RETURN(const int64_t bytes,
                     CheckedByteSize(outputs[o].shape, ElementWidth(outputs[o].dtype), what));
    if (bytes > limits.max_stream_bytes - total) {
      return TooBig(limits, what, bytes, outputs[o].shape, outputs[o].dtype);
    }
    total += bytes;
    s->output_bytes_ += bytes;
  }
  return s;
}

absl::Status StreamedExecution::AddChunk(const v1::TensorChunk& chunk) {
  const absl::string_view data = chunk.data();
  return AddChunk(chunk.tensor(), chunk.offset(), absl::MakeConstSpan(&data, 1));
}

absl::Status StreamedExecution::AddChunk(uint32_t tensor, uint64_t offset,
                                         absl::Span<const absl::string_view> pieces) {
  const int64_t num_inputs = static_cast<int64_t>(inputs_.size());
  if (tensor >= num_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk.tensor is ", tensor, " but the header has ", num_inputs, " inputs"));
  }
  const int i = static_cast<int>(tensor);
  Input& in = inputs_[i];
  int64_t n = 0;
  for (absl::string_view p : pieces) n += static_cast<int64_t>(p.size());
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty chunk for ", InputName(*def_, i), " at offset ", offset));
  }
  if (n > limits_.stream_chunk_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk of ", n, " bytes for ", InputName(*def_, i), " exceeds the limit of ",
                     limits_.stream_chunk_bytes, " bytes (--stream_chunk_bytes)"));
  }
  if (offset != static_cast<uint64_t>(in.received)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk for ", InputName(*def_, i), " at offset ", offset, ", expected offset ", in.received,
        ": each input's chunks must come in order, without gaps or repeats"));
  }
  if (n > in.bytes - in.received) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk for ", InputName(*def_, i), " runs past its end: offset ", in.received,
                     " + ", n, " bytes > ", in.bytes, " bytes (shape ", ShapeToString(in.shape),
                     " of ", DTypeName(in.dtype), ")"));
  }
  if (in.dtype == DType::kBool) {
    // As Execute: a BOOL is one byte, 0 or 1 (kernels and readers rely on it).
    int64_t at = in.received;
    for (absl::string_view p : pieces) {
      if (const int64_t k = FindInvalidBool(p); k >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(InputName(*def_, i), " byte ", at + k, " = ",
                                                       int{static_cast<uint8_t>(p[k])},
                                                       " is not a valid BOOL (0 or 1)"));
      }
      at += static_cast<int64_t>(p.size());
    }
  }
  if (in.received == 0) in.tensor = Tensor(in.dtype, in.shape);
  char* dst = static_cast<char*>(in.tensor.mutable_data()) + in.received;
  for (absl::string_view p : pieces) {
    in.crc = Crc32WhileCopying(in.crc, p, [&dst](const char* block, size_t k) {
      std::memcpy(dst, block, k);
      dst += k;
    });
  }
  in.received += n;
  received_bytes_ += n;
  return absl::OkStatus();
}

absl::Status StreamedExecution::EndOfInput() {
  for (int i = 0; i < static_cast<int>(inputs_.size()); ++i) {
    Input& in = inputs_[i];
    if (in.received < in.bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stream ended after ", in.received, " of ", in.bytes, " bytes of ", InputName(*def_, i),
          " (shape ", ShapeToString(in.shape), " of ", DTypeName(in.dtype), ")"));
    }
    if (in.crc != in.expected_crc) {
      return absl::DataLossError(
          absl::StrCat(InputName(*def_, i), " is corrupt: its header says CRC-32 ",
                       Hex32(in.expected_crc), ", its ", in.bytes, " bytes give ", Hex32(in.crc)));
    }
    if (in.bytes == 0) in.tensor = Tensor(in.dtype, in.shape);  // no chunk allocated it
  }
  return absl::OkStatus();
}

absl::Status StreamedExecution::Run(ThreadPool* pool, int64_t min_parallel_bytes) {
  std::vector<TensorView> views;
  views.reserve(inputs_.size());
  for (const Input& in : inputs_) views.push_back(in.tensor.view());
  // Prepare checks the plan against the op's inference, which Begin budgeted.
  ASSIGN_OR_RETURN(PreparedOp op, registry_->PrepareChain(def_->spec.name, views, attrs_, steps_));
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
  out->set_dtype(ToProtoDataType(output_->dtype()));
  for (int64_t d : output_->shape()) out->add_shape(d);
  out->set_crc32(output_crc_);
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
