// FlowWindow: the output side of a flowing ExecuteStream call
// (flow_stream.h): the messages waiting to be written, in order, with
// one write in flight at a time (the queue's head), and the window that
// pauses reading while the output queued and the input held would pass
// --stream_window_bytes. FlowStream, the flowing state machine, decides when
// to read, write and end; this holds what it queues.
//
// Thread-compatible: FlowStream calls it with its own mutex held (a flowing
// call's read and write callbacks run at once).
#ifndef TENSOROPS_SERVER_GRPC_FLOW_WINDOW_H_
#define TENSOROPS_SERVER_GRPC_FLOW_WINDOW_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <deque>
#include <utility>

#include "wire/limits.h"

namespace tensorops {

class FlowWindow {
 public:
  // Queues a message carrying `bytes` output bytes (0: a header or trailer).
  void Push(grpc::ByteBuffer buffer, int64_t bytes) {
    queue_.push_back(std::move(buffer));
    queue_sizes_.push_back(bytes);
    queued_bytes_ += bytes;
  }

  // The head of the queue to write now, unless one is in flight.
  grpc::ByteBuffer* TakeWrite() {
    if (writing_ || queue_.empty()) return nullptr;
    writing_ = true;
    return &queue_.front();
  }

  // The head's write completed (well or not): it leaves the queue.
  void WriteDone() {
    writing_ = false;
    queued_bytes_ -= queue_sizes_.front();
    queue_.pop_front();
    queue_sizes_.pop_front();
  }

  // Reading waits while the output queued, the input held (`held_bytes`)
  // and one more chunk of each would pass the window; never with nothing
  // queued, since only a write's completion resumes it.
  bool Full(int64_t held_bytes, const RequestLimits& limits) const {
    return queued_bytes_ > 0 &&
           queued_bytes_ + held_bytes + 2 * limits.stream_chunk_bytes > limits.stream_window_bytes;
  }

  bool empty() const { return queue_.empty(); }

  // Unsent messages go; the head may be in flight (gRPC holds its slices).
  void DropUnsent() {
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= queue_sizes_.back();
      queue_.pop_back();
      queue_sizes_.pop_back();
    }
  }

 private:
  std::deque<grpc::ByteBuffer> queue_;  // the head is in flight while writing_
  std::deque<int64_t> queue_sizes_;
  int64_t queued_bytes_ = 0;
  bool writing_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_FLOW_WINDOW_H_
