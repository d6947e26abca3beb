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
// A flowing call (StreamHeader.flow) overlaps the phases instead: the
// output header goes out right after admission (of the window, not the
// tensors), then each chunk read is moved at once into output chunks
// (StreamedExecution::AddChunk, on the gRPC thread: a chunk's work is a copy)
// that queue for writing while the next chunk is read, then the trailer.
// Reads and writes are then in flight together, so their callbacks may run
// at once: mu_ guards what both touch. One write is in flight at a time (the
// queue's head); reading pauses while the output queued and the input held
// would pass --stream_window_bytes, and resumes as writes complete, so gRPC's
// flow control towards a slow reader holds the server at its window. A
// layout that is buffered (StreamedExecution::buffered) is admitted again at
// its full size and runs as a non-flowing call whose chunks carry CRCs.
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
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/grpc/flow_window.h"
#include "server/grpc/grpc_call_context.h"
#include "server/v1/stream_execution.h"
#include "wire/crc32.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
namespace {

using StreamReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

class ExecuteStreamReactor final : public StreamReactor {
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
    if (flow_) {
      OnFlowRead(ok);
      return;
    }
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
    if (flow_) {
      grpc::ByteBuffer* write = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        write = TakeWrite();  // the output header
      }
      if (write != nullptr) StartTracedWrite(write);
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (flow_) {
      OnFlowWriteDone(ok);
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
    if (exec_->flow()) return StartFlow();
    return absl::OkStatus();
  }

  absl::Status OnChunk(std::vector<StreamedExecution::OutputChunk>* out = nullptr) {
    if (request_.Dump(&slices_).ok() && ReadChunkInPlace(slices_, &chunk_)) {
      const absl::Status s =
          out != nullptr
              ? exec_->AddChunk(chunk_.tensor, chunk_.offset, chunk_.pieces, chunk_.crc32, out)
              : exec_->AddChunk(chunk_.tensor, chunk_.offset, chunk_.pieces);
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
      return exec_->AddChunk(message.chunk().tensor(), message.chunk().offset(),
                             absl::MakeConstSpan(&data, 1), message.chunk().crc32(), out);
    }
    return exec_->AddChunk(message.chunk());
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

  // ---- A flowing call (see the file comment) ----

  static absl::Status Serialize(const v1::ExecuteStreamResponse& message,
                                grpc::ByteBuffer* buffer) {
    bool own_buffer = false;
    if (!grpc::SerializationTraits<v1::ExecuteStreamResponse>::Serialize(message, buffer,
                                                                         &own_buffer)
             .ok()) {
      return absl::InternalError("could not serialise an ExecuteStream response");
    }
    return absl::OkStatus();
  }

  // After admission: the output header is the first message to write (its
  // type and shape come from inference); OnReadDone starts it.
  absl::Status StartFlow() {
    v1::ExecuteStreamResponse header;
    exec_->FillOutputHeader(header.mutable_header());
    grpc::ByteBuffer buffer;
    if (absl::Status s = Serialize(header, &buffer); !s.ok()) return s;
    flow_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    Enqueue(std::move(buffer), 0);
    return absl::OkStatus();
  }

  void Enqueue(grpc::ByteBuffer buffer, int64_t bytes) {  // mu_ held
    window_.Push(std::move(buffer), bytes);
    sent_bytes_ += bytes;
  }

  void EnqueueChunks(std::vector<StreamedExecution::OutputChunk>* chunks) {  // mu_ held
    for (StreamedExecution::OutputChunk& c : *chunks) {
      Enqueue(EncodeChunkInPlace(0, c.offset, c.data, std::move(c.owner), c.crc32),
              static_cast<int64_t>(c.data.size()));
    }
  }

  absl::Status EnqueueTrailer() {  // mu_ held
    v1::ExecuteStreamResponse trailer;
    trailer.mutable_trailer()->add_crc32(exec_->flow_output_crc());
    grpc::ByteBuffer buffer;
    if (absl::Status s = Serialize(trailer, &buffer); !s.ok()) return s;
    Enqueue(std::move(buffer), 0);
    trailer_queued_ = true;
    return absl::OkStatus();
  }

  // Writes the call's next message (either path); the first one carries the
  // initial metadata, so the call's traceparent is added before it. One
  // write is in flight at a time (TakeWrite), so the first is never raced.
  void StartTracedWrite(grpc::ByteBuffer* write) {
    if (!answered_.exchange(true)) AddTraceparent(call_, ctx_, /*answered=*/true);
    StartWrite(write);
  }

  // The head of the queue to write now, unless one is in flight.
  grpc::ByteBuffer* TakeWrite() { return window_.TakeWrite(); }  // mu_ held

  // Reading waits while the window is full (FlowWindow::Full).
  bool WindowFull() const {  // mu_ held
    return window_.Full(exec_->held_bytes(), pipeline_->limits());
  }

  // A buffered call's next output chunk, with its CRC, or the trailer.
  absl::Status RefillBuffered() {  // mu_ held
    uint64_t offset = 0;
    absl::string_view data;
    if (!exec_->NextChunk(&offset, &data)) {
      sending_buffered_ = false;
      return EnqueueTrailer();
    }
    const int64_t n = static_cast<int64_t>(data.size());
    Enqueue(EncodeChunkInPlace(0, offset, data, exec_->output_owner(), Crc32(0, data.data(), n)),
            n);
    return absl::OkStatus();
  }

  void OnFlowRead(bool ok) {
    std::vector<StreamedExecution::OutputChunk> produced;
    absl::Status status;
    grpc::ByteBuffer* write = nullptr;
    bool read = false;
    bool run_kernel = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ended_) return;
      if (!ok) {
        status = FlowEndOfInput(&run_kernel);
      } else {
        status = OnChunk(&produced);
        if (status.ok() && exec_->buffered() && !readmitted_) {
          // Declined by the plan: the whole call's budget from now on.
          readmitted_ = true;
          status = call_.Admit(exec_->budget_bytes(), AdmissionController::Queue::kLater);
        }
        if (status.ok()) {
          EnqueueChunks(&produced);
          read = !WindowFull();
          read_paused_ = !read;
        }
      }
      if (status.ok()) write = TakeWrite();
    }
    if (!status.ok()) {
      EndFlow(status);
      return;
    }
    if (write != nullptr) StartTracedWrite(write);
    if (read) {
      request_.Clear();
      StartRead(&request_);
    }
    if (run_kernel) RunBuffered();
  }

  // The read side ended: checks, then the trailer (or a buffered call's kernel).
  absl::Status FlowEndOfInput(bool* run_kernel) {  // mu_ held
    input_done_ = true;
    if (ctx_->IsCancelled()) {
      return absl::CancelledError(
          absl::StrCat("the call was cancelled (client cancel, deadline or disconnect) after ",
                       exec_->received_bytes(), " input bytes"));
    }
    if (absl::Status s = exec_->EndOfInput(); !s.ok()) return s;
    if (!exec_->buffered()) return EnqueueTrailer();
    if (absl::Status s = call_.EnterQueue(); !s.ok()) return s;
    kernel_running_ = true;
    *run_kernel = true;
    return absl::OkStatus();
  }

  // A buffered call's kernel, as a non-flowing call's; then its output.
  void RunBuffered() {
    call_.Run(
        exec_->output_bytes(),
        [this](ThreadPool* pool, int64_t min_parallel_bytes) {
          absl::Status s = exec_->Run(pool, min_parallel_bytes);
          if (s.ok()) call_.RecordChainSteps(exec_->chain());
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
              write = TakeWrite();
            }
          }
          if (!status.ok()) {
            EndFlow(status);
            return;
          }
          if (write != nullptr) StartTracedWrite(write);
        });
  }

  void OnFlowWriteDone(bool ok) {
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
        write = TakeWrite();
        finish = write == nullptr && trailer_queued_;
        if (read_paused_ && !input_done_ && !WindowFull()) {
          read_paused_ = false;
          read = true;
        }
      }
    }
    if (!status.ok()) {
      EndFlow(status);
      return;
    }
    if (write != nullptr) StartTracedWrite(write);
    if (read) {
      request_.Clear();
      StartRead(&request_);
    }
    if (finish) EndFlow(absl::OkStatus());
  }

  // A flowing call's End: once, from whichever side fails first; while a
  // buffered call's kernel runs, its completion ends the call instead (the
  // kernel reads exec_, and OnDone could otherwise come first).
  void EndFlow(const absl::Status& status) {
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
    call_.Finish(status, received, sent);
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

  // A flowing call (set in OnHeader, before a read and a write can be in
  // flight together).
  bool flow_ = false;
  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  std::mutex mu_;
  // Messages to write, one in flight at a time, and the read window.
  FlowWindow window_;              // guarded by mu_
  bool read_paused_ = false;       // guarded by mu_
  bool input_done_ = false;        // guarded by mu_
  bool trailer_queued_ = false;    // guarded by mu_
  bool kernel_running_ = false;    // guarded by mu_
  bool sending_buffered_ = false;  // guarded by mu_: a buffered call's output
  bool readmitted_ = false;        // guarded by mu_
  bool ended_ = false;             // guarded by mu_
  absl::Status deferred_;          // guarded by mu_: an end while the kernel ran
};

}  // namespace

StreamReactor* NewExecuteStreamReactor(CallPipeline* pipeline, const CallMethod* method,
                                       grpc::CallbackServerContext* ctx) {
  return new ExecuteStreamReactor(pipeline, method, ctx);
}

}  // namespace tensorops
