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
// A flowing call (StreamHeader.flow) overlaps the phases instead: its own
// state machine, FlowStream (flow_stream.h), which this reactor hands its
// read and write callbacks once the header is admitted. A layout that is
// buffered (StreamedExecution::buffered) stays with FlowStream, admitted
// again at its full size, and runs as a non-flowing call whose chunks carry CRCs.
//
// The method is registered raw (grpc::ByteBuffer both ways): chunk messages
// are read and written in place (wire/stream_chunk.h), so an input byte is
// copied once, from the receive slices into its tensor, and an output byte
// not at all. Headers, and chunks in any unusual encoding, go through the
// generated protobuf classes.
#include "server/grpc/stream_reactor.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/grpc/flow_stream.h"
#include "server/grpc/grpc_call_context.h"
#include "server/v1/stream_execution.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
namespace {

using StreamReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

class ExecuteStreamReactor final : public StreamReactor, private FlowStream::Rpc {
 public:
  ExecuteStreamReactor(CallPipeline* pipeline, const CallMethod* method,
                       grpc::CallbackServerContext* ctx)
      : pipeline_(pipeline),
        ctx_(ctx),
        call_context_(ctx),
        call_(pipeline, method, &call_context_, [this](const absl::Status& status) {
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
    if (flow_ != nullptr) {
      flow_->OnReadDone(ok);
      return;
    }
    if (!ok) {
      EndOfUpload();
      return;
    }
    if (exec_ == nullptr) {
      OnHeader();  // reads on once the call is admitted
      return;
    }
    if (absl::Status status = OnChunk(exec_.get()); !status.ok()) {
      End(status);
      return;
    }
    request_.Clear();
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (flow_ != nullptr) {
      flow_->OnWriteDone(ok);
      return;
    }
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

  // Drops slices_ (request_'s receive slices, viewed while a chunk is
  // placed) while request_ still holds them, so that request_.Clear() or
  // its destructor lets go of them last. gRPC 1.51 gives a receive slice's
  // memory back to the resource quota, which under memory pressure wakes the
  // quota's reclaimer through grpc_core::ExecCtx::Run; grpc_byte_buffer_destroy
  // opens an ExecCtx for that, but a grpc::Slice's own unref does not, and
  // on a callback thread (which has none) the last unref crashed the server
  // (SIGSEGV in ExecCtx::Run under ~Slice, after a flowing stream's chunk,
  // --grpc_memory_bytes nearly used up: FlowQuotaTest in
  // tests/e2e/flow_stream_test.cc).
  void ReleaseSlices() {
    chunk_.pieces.clear();
    slices_.clear();
  }

  // The header: checked, then admitted for the call's whole budget, which
  // may wait for a busy budget as a unary call does (Call::AdmitOrWait); no
  // read or write is in flight meanwhile, so OnAdmitted may run on another
  // thread (the one that freed the bytes, or the admission timer's).
  void OnHeader() {
    absl::StatusOr<std::unique_ptr<StreamedExecution>> exec = BeginExecution();
    if (!exec.ok()) {
      End(exec.status());
      return;
    }
    const int64_t budget_bytes = (*exec)->budget_bytes();
    call_.AdmitOrWait(budget_bytes, AdmissionController::Queue::kLater,
                      [this, exec = *std::move(exec)](absl::Status status, bool waited) mutable {
                        OnAdmitted(status, waited, std::move(exec));
                      });
  }

  absl::StatusOr<std::unique_ptr<StreamedExecution>> BeginExecution() {
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
    return exec;
  }

  // The header's admission ended: the call starts (buffered, or flowing),
  // or ends with the refusal. After a wait this runs outside any reaction,
  // so it starts one operation, its last act (FlowStream::Begin says why).
  void OnAdmitted(const absl::Status& admission, bool waited,
                  std::unique_ptr<StreamedExecution> exec) {
    if (!admission.ok()) {
      End(admission);
      return;
    }
    if (!exec->flow()) {
      exec_ = std::move(exec);
      request_.Clear();
      StartRead(&request_);
      return;
    }
    absl::StatusOr<std::unique_ptr<FlowStream>> flow =
        FlowStream::Make(this, &call_, ctx_, pipeline_->limits(), std::move(exec));
    if (!flow.ok()) {
      End(flow.status());
      return;
    }
    flow_ = *std::move(flow);
    flow_->Begin(/*in_reaction=*/!waited);
  }

  // The chunk just read into `exec`; flowing, its output chunks to `out`.
  absl::Status OnChunk(StreamedExecution* exec,
                       std::vector<StreamedExecution::OutputChunk>* out = nullptr) {
    if (request_.Dump(&slices_).ok() && ReadChunkInPlace(slices_, &chunk_)) {
      const absl::Status s =
          out != nullptr
              ? exec->AddChunk(chunk_.tensor, chunk_.offset, chunk_.pieces, chunk_.crc32, out)
              : exec->AddChunk(chunk_.tensor, chunk_.offset, chunk_.pieces);
      ReleaseSlices();
      return s;
    }
    ReleaseSlices();
    v1::ExecuteStreamRequest message;
    if (absl::Status s = Parse(&message); !s.ok()) return s;
    if (message.has_header()) {
      return absl::InvalidArgumentError("a second header in one ExecuteStream call");
    }
    if (!message.has_chunk()) {
      return absl::InvalidArgumentError("an ExecuteStream message with neither header nor chunk");
    }
    if (out != nullptr) {
      const absl::string_view data = message.chunk().data();
      return exec->AddChunk(message.chunk().tensor(), message.chunk().offset(),
                            absl::MakeConstSpan(&data, 1), message.chunk().crc32(), out);
    }
    return exec->AddChunk(message.chunk());
  }

  // The read side ended: the client closed it (upload complete, or short),
  // or the call broke (cancelled, deadline, disconnect).
  void EndOfUpload() {
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
          StartTracedWrite(&response_);
        });
  }

  // ---- FlowStream::Rpc: a flowing call's reads and writes ----

  void ReadNext() override {
    request_.Clear();
    StartRead(&request_);
  }
  void WriteNext(grpc::ByteBuffer* message) override { StartTracedWrite(message); }
  absl::Status AddChunk(StreamedExecution* exec,
                        std::vector<StreamedExecution::OutputChunk>* out) override {
    return OnChunk(exec, out);
  }

  // Writes the call's next message (either path); the first one carries the
  // initial metadata, so the call's traceparent is added before it. One
  // write is in flight at a time, so the first is never raced.
  void StartTracedWrite(grpc::ByteBuffer* write) {
    if (!answered_.exchange(true)) AddTraceparent(call_, ctx_, /*answered=*/true);
    StartWrite(write);
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
  std::vector<grpc::Slice> slices_;  // request_'s, while a chunk is placed (ReleaseSlices)
  ChunkInPlace chunk_;
  std::unique_ptr<StreamedExecution> exec_;
  int64_t sent_bytes_ = 0;
  // The output header is on its way (traceparent sent); atomic because a
  // flowing call's writes start on kernel threads too.
  std::atomic<bool> answered_{false};

  // A flowing call's state machine (set in OnHeader, before a read and a
  // write can be in flight together); null otherwise.
  std::unique_ptr<FlowStream> flow_;
};

}  // namespace

StreamReactor* NewExecuteStreamReactor(CallPipeline* pipeline, const CallMethod* method,
                                       grpc::CallbackServerContext* ctx) {
  return new ExecuteStreamReactor(pipeline, method, ctx);
}

}  // namespace tensorops
