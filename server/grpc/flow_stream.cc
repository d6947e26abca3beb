#include "server/grpc/flow_stream.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/crc32.h"
#include "wire/stream_chunk.h"

namespace tensorops {
namespace {

absl::Status Serialize(const v1::ExecuteStreamResponse& message, grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  if (!grpc::SerializationTraits<v1::ExecuteStreamResponse>::Serialize(message, buffer, &own_buffer)
           .ok()) {
    return absl::InternalError("could not serialise an ExecuteStream response");
  }
  return absl::OkStatus();
}

}  // namespace

FlowStream::FlowStream(Rpc* rpc, Call* call, grpc::ServerContextBase* ctx,
                       const RequestLimits& limits, std::unique_ptr<StreamedExecution> exec)
    : rpc_(rpc), call_(call), ctx_(ctx), limits_(limits), exec_(std::move(exec)) {}

absl::StatusOr<std::unique_ptr<FlowStream>> FlowStream::Make(
    Rpc* rpc, Call* call, grpc::ServerContextBase* ctx, const RequestLimits& limits,
    std::unique_ptr<StreamedExecution> exec) {
  // The output header (its type and shape come from inference) goes first.
  v1::ExecuteStreamResponse header;
  exec->FillOutputHeader(header.mutable_header());
  grpc::ByteBuffer buffer;
  if (absl::Status s = Serialize(header, &buffer); !s.ok()) return s;
  std::unique_ptr<FlowStream> flow(new FlowStream(rpc, call, ctx, limits, std::move(exec)));
  std::lock_guard<std::mutex> lock(flow->mu_);
  flow->Enqueue(std::move(buffer), 0);
  return flow;
}

void FlowStream::Begin(bool in_reaction) {
  grpc::ByteBuffer* write = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write = window_.TakeWrite();                                // the output header
    if (!in_reaction && write != nullptr) read_paused_ = true;  // OnWriteDone reads on
  }
  if (write != nullptr) rpc_->WriteNext(write);
  if (in_reaction || write == nullptr) rpc_->ReadNext();
}

void FlowStream::Enqueue(grpc::ByteBuffer buffer, int64_t bytes) {
  window_.Push(std::move(buffer), bytes);
  sent_bytes_ += bytes;
}

void FlowStream::EnqueueChunks(std::vector<StreamedExecution::OutputChunk>* chunks) {
  for (StreamedExecution::OutputChunk& c : *chunks) {
    Enqueue(EncodeChunkInPlace(0, c.offset, c.data, std::move(c.owner), c.crc32),
            static_cast<int64_t>(c.data.size()));
  }
}

absl::Status FlowStream::EnqueueTrailer() {
  v1::ExecuteStreamResponse trailer;
  trailer.mutable_trailer()->add_crc32(exec_->flow_output_crc());
  grpc::ByteBuffer buffer;
  if (absl::Status s = Serialize(trailer, &buffer); !s.ok()) return s;
  Enqueue(std::move(buffer), 0);
  trailer_queued_ = true;
  return absl::OkStatus();
}

// Reading waits while the window is full (FlowWindow::Full).
bool FlowStream::WindowFull() const { return window_.Full(exec_->held_bytes(), limits_); }

// A buffered call's next output chunk, with its CRC, or the trailer.
absl::Status FlowStream::RefillBuffered() {
  uint64_t offset = 0;
  absl::string_view data;
  if (!exec_->NextChunk(&offset, &data)) {
    sending_buffered_ = false;
    return EnqueueTrailer();
  }
  const int64_t n = static_cast<int64_t>(data.size());
  Enqueue(EncodeChunkInPlace(0, offset, data, exec_->output_owner(), Crc32(0, data.data(), n)), n);
  return absl::OkStatus();
}

// A chunk read: its output queued, and whether to read on (the window).
absl::Status FlowStream::ReadChunk(std::vector<StreamedExecution::OutputChunk>* produced,
                                   bool* read) {
  absl::Status status = rpc_->AddChunk(exec_.get(), produced);
  if (status.ok() && exec_->buffered() && !readmitted_) {
    // Declined by the plan: the whole call's budget from now on.
    readmitted_ = true;
    status = call_->Admit(exec_->budget_bytes(), AdmissionController::Queue::kLater);
  }
  if (!status.ok()) return status;
  EnqueueChunks(produced);
  *read = !WindowFull();
  read_paused_ = !*read;
  return absl::OkStatus();
}

// The read side ended: checks, then the trailer (or a buffered call's kernel).
absl::Status FlowStream::EndOfInput(bool* run_kernel) {
  input_done_ = true;
  if (ctx_->IsCancelled()) {
    return absl::CancelledError(
        absl::StrCat("the call was cancelled (client cancel, deadline or disconnect) after ",
                     exec_->received_bytes(), " input bytes"));
  }
  if (absl::Status s = exec_->EndOfInput(); !s.ok()) return s;
  if (!exec_->buffered()) return EnqueueTrailer();
  if (absl::Status s = call_->EnterQueue(); !s.ok()) return s;
  kernel_running_ = true;
  *run_kernel = true;
  return absl::OkStatus();
}

void FlowStream::OnReadDone(bool ok) {
  // Declared before the lock: what the chunks left behind goes after it.
  std::vector<StreamedExecution::OutputChunk> produced;
  absl::Status status;
  grpc::ByteBuffer* write = nullptr;
  bool read = false;
  bool run_kernel = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    status = ok ? ReadChunk(&produced, &read) : EndOfInput(&run_kernel);
    if (status.ok()) write = window_.TakeWrite();
  }
  if (!status.ok()) {
    End(status);
    return;
  }
  if (write != nullptr) rpc_->WriteNext(write);
  if (read) rpc_->ReadNext();
  if (run_kernel) RunBuffered();
}

// A buffered call's kernel, as a non-flowing call's; then its output.
void FlowStream::RunBuffered() {
  call_->Run(
      exec_->output_bytes(),
      [this](ThreadPool* pool, int64_t min_parallel_bytes) {
        absl::Status s = exec_->Run(pool, min_parallel_bytes);
        if (s.ok()) call_->RecordChainSteps(exec_->chain());
        return s;
      },
      [this](absl::Status status) {
        grpc::ByteBuffer* write = nullptr;
        {
          std::lock_guard<std::mutex> lock(mu_);
          kernel_running_ = false;
          if (status.ok() && !deferred_.ok()) status = deferred_;
          if (status.ok()) {
            sending_buffered_ = true;
            status = RefillBuffered();
            write = window_.TakeWrite();
          }
        }
        if (!status.ok()) {
          End(status);
          return;
        }
        if (write != nullptr) rpc_->WriteNext(write);
      });
}

void FlowStream::OnWriteDone(bool ok) {
  grpc::ByteBuffer* write = nullptr;
  bool read = false;
  bool finish = false;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    window_.WriteDone();
    if (ended_) return;
    if (!ok) {
      status = absl::CancelledError("the client went away while the output was being sent");
    } else {
      if (window_.empty() && sending_buffered_) status = RefillBuffered();
      write = window_.TakeWrite();
      finish = write == nullptr && trailer_queued_;
      if (read_paused_ && !input_done_ && !WindowFull()) {
        read_paused_ = false;
        read = true;
      }
    }
  }
  if (!status.ok()) {
    End(status);
    return;
  }
  if (write != nullptr) rpc_->WriteNext(write);
  if (read) rpc_->ReadNext();
  if (finish) End(absl::OkStatus());
}

// Once, from whichever side fails first; while a buffered call's kernel
// runs, its completion ends the call instead (the kernel reads exec_, and
// OnDone could otherwise come first).
void FlowStream::End(const absl::Status& status) {
  int64_t received = 0;
  int64_t sent = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    if (kernel_running_) {
      if (deferred_.ok()) deferred_ = status;
      return;
    }
    ended_ = true;
    received = exec_ != nullptr ? exec_->received_bytes() : 0;
    sent = sent_bytes_;
    exec_.reset();
    // Unsent chunks go now; the head may be in flight (gRPC holds its slices).
    window_.DropUnsent();
  }
  call_->Finish(status, received, sent);
}

}  // namespace tensorops
