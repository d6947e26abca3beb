// A request's body as the HTTP transport reads it: contiguous, so tensors
// are used in place from it, and counted against the in-flight byte budget
// (--max_inflight_bytes) before its bytes are taken.
//
// Thread-safety: a BodyBytes is used by one thread at a time (its
// connection's loop, then the call that takes it over).
#ifndef TENSOROPS_SERVER_HTTP_REQUEST_BODY_H_
#define TENSOROPS_SERVER_HTTP_REQUEST_BODY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/tensor.h"
#include "server/core/admission.h"
#include "server/core/call.h"

namespace tensorops {

// Address space for a body of unknown length (chunked): reserved once at
// the body limit with PROT_NONE (no memory, no commit charge) and made
// writable in steps as bytes arrive, so the body grows in place, without a
// copy, and holds no more pages than it has bytes. (A buffer that doubled
// held up to twice the body and copied it at each step: a 274 MiB chunked
// body took the RSS from 19 to 555 MiB.) Move-only; unmapped when destroyed.
class GrowableBuffer {
 public:
  GrowableBuffer() = default;
  GrowableBuffer(GrowableBuffer&& other) noexcept { *this = std::move(other); }
  GrowableBuffer& operator=(GrowableBuffer&& other) noexcept;
  ~GrowableBuffer() { Unmap(); }

  // Makes the first `n` bytes writable (n <= max_bytes, the same max_bytes
  // on every call). False when the system refuses the address space or the
  // commit.
  bool MakeWritable(uint64_t n, uint64_t max_bytes);
  char* data() const { return base_; }

 private:
  void Unmap();

  char* base_ = nullptr;
  uint64_t reserved_ = 0;  // address space, PROT_NONE beyond writable_
  uint64_t writable_ = 0;
};

// A request body, contiguous: tensors are used in place from it. Its bytes
// count against the in-flight budget (--max_inflight_bytes) before they are
// taken, as a gRPC message's do: a reservation (CallPipeline::Reserve) that
// the call's admission then takes over (Call::HoldReservation). A body of
// known length is reserved whole before any of it is read, into one buffer
// from BufferCache (through Tensor), whose pages a previous call already
// touched (a fresh allocation's first-touch page faults cost more than
// reading the bytes). A chunked body grows in a GrowableBuffer, reserved a
// step ahead of its bytes.
class BodyBytes {
 public:
  // Every request's body counts against `pipeline`'s budget, up to
  // `max_bytes` (the body limit, which the parser enforces).
  void CountAgainst(CallPipeline* pipeline, uint64_t max_bytes) {
    pipeline_ = pipeline;
    max_bytes_ = max_bytes;
  }
  // A known length: `n` bytes reserved, then room for them. On refusal
  // (RESOURCE_EXHAUSTED naming the budget, UNAVAILABLE while draining)
  // nothing is allocated.
  absl::Status ReserveExact(uint64_t n);
  // Room for `n` more bytes at end(): within ReserveExact's room, else (a
  // chunked body) growing the room and its reservation by a step: an eighth
  // of the body, 64 KiB to 8 MiB, so a body holds at most its size plus one
  // step. On refusal nothing changes and refusal() says why.
  absl::Status MakeRoom(uint64_t n);
  char* end() { return data_ + size_; }
  // `n` bytes were written at end() (within MakeRoom's room).
  void Grow(uint64_t n) { size_ += n; }
  uint64_t size() const { return size_; }
  absl::string_view view() const {
    if (size_ == 0) return "";
    return absl::string_view(data_, size_);
  }
  // Why the body could not grow (OK when it could).
  const absl::Status& refusal() const { return refusal_; }
  // The reservation, for the call that uses the body; the body keeps its bytes.
  AdmissionTicket TakeReservation() { return std::move(reservation_); }

 private:
  static constexpr uint64_t kMinStep = 64 << 10;
  static constexpr uint64_t kMaxStep = 8 << 20;

  // Reserves `n` bytes in all; a refusal's message starts with `what`.
  absl::Status Count(uint64_t n, absl::string_view what);
  absl::Status GrowTo(uint64_t need);

  CallPipeline* pipeline_ = nullptr;
  uint64_t max_bytes_ = 0;
  AdmissionTicket reservation_;
  Tensor storage_;           // a known length
  GrowableBuffer growable_;  // a chunked body
  char* data_ = nullptr;     // storage_'s or growable_'s
  uint64_t capacity_ = 0;
  uint64_t size_ = 0;
  bool exact_ = false;  // ReserveExact's room: never grows
  absl::Status refusal_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_REQUEST_BODY_H_
