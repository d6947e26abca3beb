// FlowStream: the flowing state machine of an ExecuteStream call
// (StreamHeader.flow), beside the reactor (stream_reactor.cc) that owns the
// RPC and runs the non-flowing machine. The output leaves while the input
// arrives: each chunk read is moved at once into output chunks
// (StreamedExecution::AddChunk, on the gRPC thread: a chunk's work is a
// copy) that queue in a FlowWindow while the next chunk is read.
//
// States, once the header is admitted (of the window, not the tensors):
//   flowing    Begin queued the output header and started it and the first
//              read; each read's chunk queues its output chunks; reading
//              pauses (read_paused_) while the output queued and the input
//              held would pass --stream_window_bytes, and a completed write
//              resumes it, so gRPC's flow control towards a slow reader holds
//              the server at its window. One write is in flight at a time.
//   trailing   the client half-closed (input_done_): the input's lengths and
//              CRCs checked, the trailer (the output's CRC-32) queued
//              (trailer_queued_); the last write's completion ends the call.
//   buffered   the plan declined the layout (StreamedExecution::buffered):
//              admitted again at its full size on the chunk that said so
//              (readmitted_); at the half-close the kernel runs on the pool
//              (kernel_running_), then the output goes one chunk per write,
//              each with its CRC (sending_buffered_), then the trailer.
//   ended      (ended_) exactly once, by the first failure on either side or
//              by the last write: the execution freed, unsent messages
//              dropped, Call::Finish. An end while the kernel runs waits for
//              its completion (deferred_), since the kernel reads the tensors.
// Transitions come from three events: OnReadDone, OnWriteDone and the
// buffered kernel's completion.
//
// Thread-safety: thread-safe. A read and a write are in flight together, so
// their callbacks (and the kernel's completion, on a pool thread) may run at
// once: mu_ guards the state and the execution. The Rpc's methods are called
// without mu_ held, except AddChunk (which moves the read message into the
// execution); the Rpc must outlive the FlowStream.
#ifndef TENSOROPS_SERVER_GRPC_FLOW_STREAM_H_
#define TENSOROPS_SERVER_GRPC_FLOW_STREAM_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/call.h"
#include "server/grpc/flow_window.h"
#include "server/v1/stream_execution.h"
#include "wire/limits.h"

namespace tensorops {

class FlowStream {
 public:
  // The RPC's half, which the reactor implements: reading and writing
  // messages, and reading a chunk message into the execution.
  class Rpc {
   public:
    virtual ~Rpc() = default;
    // Starts the next read (one is in flight at a time).
    virtual void ReadNext() = 0;
    // Starts writing `message` (one is in flight at a time; the first
    // carries the initial metadata).
    virtual void WriteNext(grpc::ByteBuffer* message) = 0;
    // Moves the message just read (a chunk, or a bad message) into `exec`,
    // appending its output chunks to `out`. Called with mu_ held.
    virtual absl::Status AddChunk(StreamedExecution* exec,
                                  std::vector<StreamedExecution::OutputChunk>* out) = 0;
  };

  // `rpc`, `call` and `ctx` must outlive it; `call` is admitted for `exec`'s
  // budget. Serialises the output header, the first message to write: an
  // error if that fails (nothing started).
  static absl::StatusOr<std::unique_ptr<FlowStream>> Make(Rpc* rpc, Call* call,
                                                          grpc::ServerContextBase* ctx,
                                                          const RequestLimits& limits,
                                                          std::unique_ptr<StreamedExecution> exec);

  // Starts the output header's write and the first chunk's read. Inside a
  // reaction (the header's OnReadDone) both go at once. From any other
  // thread (the header waited for the budget) only the write does: as soon
  // as one operation is in flight the call may end on a gRPC thread and be
  // gone, so nothing may follow it; its OnWriteDone starts the reads.
  void Begin(bool in_reaction);

  // The reactor's callbacks, forwarded.
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);

 private:
  FlowStream(Rpc* rpc, Call* call, grpc::ServerContextBase* ctx, const RequestLimits& limits,
             std::unique_ptr<StreamedExecution> exec);

  void Enqueue(grpc::ByteBuffer buffer, int64_t bytes);                     // mu_ held
  void EnqueueChunks(std::vector<StreamedExecution::OutputChunk>* chunks);  // mu_ held
  absl::Status EnqueueTrailer();                                            // mu_ held
  bool WindowFull() const;                                                  // mu_ held
  absl::Status RefillBuffered();                                            // mu_ held
  absl::Status ReadChunk(std::vector<StreamedExecution::OutputChunk>* produced,
                         bool* read);         // mu_ held
  absl::Status EndOfInput(bool* run_kernel);  // mu_ held
  void RunBuffered();
  void End(const absl::Status& status);

  Rpc* const rpc_;
  Call* const call_;
  grpc::ServerContextBase* const ctx_;
  const RequestLimits& limits_;

  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  std::mutex mu_;
  // Read by the buffered kernel without mu_: End waits for it (deferred_).
  std::unique_ptr<StreamedExecution> exec_;  // guarded by mu_; null once ended
  FlowWindow window_;                        // guarded by mu_
  int64_t sent_bytes_ = 0;                   // guarded by mu_: output bytes queued
  bool read_paused_ = false;                 // guarded by mu_
  bool input_done_ = false;                  // guarded by mu_
  bool trailer_queued_ = false;              // guarded by mu_
  bool kernel_running_ = false;              // guarded by mu_
  bool sending_buffered_ = false;            // guarded by mu_: a buffered call's output
  bool readmitted_ = false;                  // guarded by mu_
  bool ended_ = false;                       // guarded by mu_
  absl::Status deferred_;                    // guarded by mu_: an end while the kernel ran
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_FLOW_STREAM_H_
