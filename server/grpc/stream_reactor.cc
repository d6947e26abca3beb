// ExecuteStream: the RPC half of a streamed call.
//
// One call moves through its phases strictly one after another, so at most
// one of its callbacks runs at any time and the reactor needs no lock:
//   upload    gRPC threads: header -> validation and admission (bytes only);
//             each chunk -> copied into its input; the client's half-close
//             -> lengths and CRCs checked, then a queue slot;
//   kernel    Call::Run: dropped if the deadline passed or the call was
//             cancelled, else the op runs (split across the pool when large);
//   download  gRPC threads: the output header, then one chunk per write,
//             each written when the previous one left (flow control bounds
//             what is buffered to one chunk).
// Every failure (a bad message, a broken read or write when the client
// cancels or disconnects) ends the call at once through End(), which frees
// the tensors; the Call gives the bytes back to admission control.
//
// The method is registered raw (grpc::ByteBuffer both ways): chunk messages
// are read and written in place (wire/stream_chunk.h), so an input byte is
// copied once, from the receive slices into its tensor, and an output byte
// not at all. Headers, and chunks in any unusual encoding, go through the
// generated protobuf classes.
#include "server/grpc/stream_reactor.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/grpc/grpc_call_context.h"
#include "server/v1/stream_execution.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
namespace {

using StreamReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

class ExecuteStreamReactor final : public StreamReactor {
 public:
  ExecuteStreamReactor(CallPipeline* pipeline, grpc::CallbackServerContext* ctx)
      : pipeline_(pipeline),
        ctx_(ctx),
        call_context_(ctx),
        call_(pipeline, CallMethod::kExecuteStream, &call_context_,
              [this](const absl::Status& status) {
                if (!answered_) AddTraceparent(call_, ctx_, /*answered=*/false);
                AddServerTiming(call_, ctx_);
                StreamReactor::Finish(ToGrpcStatus(status, ctx_));
              }) {
    if (absl::Status s = call_.Open(); !s.ok()) {
      End(s);
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndOfUpload();
      return;
    }
    absl::Status status = exec_ == nullptr ? OnHeader() : OnChunk();
    if (!status.ok()) {
      End(status);
      return;
    }
    request_.Clear();
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      End(absl::CancelledError("the client went away while the output was being sent"));
      return;
    }
    uint64_t offset = 0;
    absl::string_view data;
    if (exec_->NextChunk(&offset, &data)) {
      response_ = EncodeChunkInPlace(0, offset, data, exec_->output_owner());
      sent_bytes_ += static_cast<int64_t>(data.size());
      StartWrite(&response_);
      return;
    }
    End(absl::OkStatus());
  }

  void OnDone() override { delete this; }

 private:
  // A message the in-place reader does not take, parsed by protobuf.
  absl::Status Parse(v1::ExecuteStreamRequest* message) {
    if (!grpc::SerializationTraits<v1::ExecuteStreamRequest>::Deserialize(&request_, message)
             .ok()) {
      return absl::InvalidArgumentError(
          "an ExecuteStream message that is not a valid "
          "tensorops.v1.ExecuteStreamRequest");
    }
    return absl::OkStatus();
  }

  absl::Status OnHeader() {
    v1::ExecuteStreamRequest message;
    if (absl::Status s = Parse(&message); !s.ok()) return s;
    if (!message.has_header()) {
      return absl::InvalidArgumentError(
          "the first ExecuteStream message must be a header (op, attrs, input dtypes, shapes "
          "and CRC-32s); got a chunk");
    }
    const v1::StreamHeader& header = message.header();
    absl::StatusOr<std::unique_ptr<StreamedExecution>> exec =
        StreamedExecution::Begin(pipeline_->registry(), header, pipeline_->limits());
    // The op label: the canonical name once the header is valid, else "unknown".
    call_.SetOp(header.op(), exec.ok() ? pipeline_->registry().Find(header.op()) : nullptr);
    if (!exec.ok()) return exec.status();
    if (absl::Status s = call_.Admit((*exec)->budget_bytes(), AdmissionController::Queue::kLater);
        !s.ok()) {
      return s;
    }
    exec_ = *std::move(exec);
    return absl::OkStatus();
  }

  absl::Status OnChunk() {
    slices_.clear();
    if (request_.Dump(&slices_).ok() && ReadChunkInPlace(slices_, &chunk_)) {
      return exec_->AddChunk(chunk_.tensor, chunk_.offset, chunk_.pieces);
    }
    v1::ExecuteStreamRequest message;
    if (absl::Status s = Parse(&message); !s.ok()) return s;
    if (message.has_header()) {
      return absl::InvalidArgumentError("a second header in one ExecuteStream call");
    }
    if (!message.has_chunk()) {
      return absl::InvalidArgumentError("an ExecuteStream message with neither header nor chunk");
    }
    return exec_->AddChunk(message.chunk());
  }

  // The read side ended: the client closed it (upload complete, or short),
  // or the call broke (cancelled, deadline, disconnect).
  void EndOfUpload() {
    slices_.clear();  // the last chunk's receive buffers: not needed any more
    chunk_.pieces.clear();
    if (ctx_->IsCancelled()) {
      End(absl::CancelledError(
          absl::StrCat("the call was cancelled (client cancel, deadline or disconnect) after ",
                       exec_ != nullptr ? exec_->received_bytes() : 0, " input bytes")));
      return;
    }
    if (exec_ == nullptr) {
      End(absl::InvalidArgumentError("the ExecuteStream call ended before its header"));
      return;
    }
    if (absl::Status s = exec_->EndOfInput(); !s.ok()) {
      End(s);
      return;
    }
    if (absl::Status s = call_.EnterQueue(); !s.ok()) {
      End(s);
      return;
    }
    call_.Run(
        exec_->output_bytes(),
        [this](ThreadPool* pool, int64_t min_parallel_bytes) {
          absl::Status s = exec_->Run(pool, min_parallel_bytes);
          if (s.ok()) call_.RecordChainSteps(exec_->chain());
          return s;
        },
        [this](absl::Status status) {
          if (!status.ok()) {
            End(status);
            return;
          }
          v1::ExecuteStreamResponse header;
          exec_->FillOutputHeader(header.mutable_header());
          bool own_buffer = false;
          if (!grpc::SerializationTraits<v1::ExecuteStreamResponse>::Serialize(header, &response_,
                                                                               &own_buffer)
                   .ok()) {
            End(absl::InternalError("could not serialise the output header"));
            return;
          }
          // The initial metadata leaves with this first write.
          AddTraceparent(call_, ctx_, /*answered=*/true);
          answered_ = true;
          StartWrite(&response_);
        });
  }

  // Every call ends here exactly once: the tensors are freed now, not when
  // gRPC gets round to OnDone; the Call does metrics, logs, admission, Finish.
  void End(const absl::Status& status) {
    const int64_t received = exec_ != nullptr ? exec_->received_bytes() : 0;
    exec_.reset();
    call_.Finish(status, received, sent_bytes_);
  }

  CallPipeline* const pipeline_;
  grpc::CallbackServerContext* const ctx_;
  const GrpcCallContext call_context_;  // declared before call_: outlives it
  Call call_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::vector<grpc::Slice> slices_;  // request_'s, while a chunk is placed
  ChunkInPlace chunk_;
  std::unique_ptr<StreamedExecution> exec_;
  int64_t sent_bytes_ = 0;
  bool answered_ = false;  // the output header is on its way (traceparent sent)
};

}  // namespace

StreamReactor* NewExecuteStreamReactor(CallPipeline* pipeline, grpc::CallbackServerContext* ctx) {
  return new ExecuteStreamReactor(pipeline, ctx);
}

}  // namespace tensorops
