// W3C Trace Context (https://www.w3.org/TR/trace-context/) for one call, and
// the Server-Timing text of its stages, for every front door.
//
// A door hands the Call the caller's `traceparent` and `tracestate` (gRPC
// metadata, HTTP headers; CallContext). A valid traceparent makes the call
// a child of the caller's span: the trace id and the flags are kept and the
// caller's span id becomes the parent. A missing or malformed one (the spec:
// ignore it, never fail the call) starts a new trace. Either way the call
// gets a span id of its own, and the door sends back the call's own
// traceparent ("00-<trace id>-<the call's span id>-<flags>").
//
// Ids come from a per-thread xoshiro256** generator seeded once per thread
// from the OS: no lock, no allocation, a few nanoseconds per id (trace ids
// need to be unique, not secret). The text form lives in the object (a
// fixed 55-byte buffer): logging or sending it allocates nothing here.
//
// Example:
//   TraceContext t = TraceContext::Start(ctx.traceparent(), ctx.tracestate());
//   t.traceparent();  // "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
//   t.trace_id_hex();  // "4bf92f3577b34da6a3ce929d0e0e4736"
//
// Thread-safety: a TraceContext is a value; Start may be called from any
// thread.
#ifndef TENSOROPS_SERVER_CORE_TRACE_H_
#define TENSOROPS_SERVER_CORE_TRACE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tensorops {

// A traceparent's parts, as ParseTraceparent reads them.
struct TraceParent {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0;
};

// A `traceparent` header value checked as the spec's section 3.2 says:
// version 2 lowercase hex, not "ff"; a trace id of 32 and a parent id of 16
// lowercase hex digits, neither all zeros; flags 2 hex digits; version 00
// exactly 55 characters, a later version at least that with a '-' after the
// flags if longer (its extra fields ignored). Anything else: nullopt.
std::optional<TraceParent> ParseTraceparent(absl::string_view text);

// The trace context of one call: its trace id, its own span id, its
// parent's (the caller's) span id if it had one, the flags, and the
// caller's tracestate passed along.
class TraceContext {
 public:
  static constexpr size_t kTraceparentSize = 55;  // "00-" 32 "-" 16 "-" 2
  // The longest tracestate kept (the spec's 32 list members of up to 256
  // characters would allow 8 KiB; 512 is what it asks vendors to
  // propagate at least). A longer one is dropped, as a malformed one.
  static constexpr size_t kMaxTracestate = 512;

  // The call's context from what its caller sent (nullopt: nothing).
  static TraceContext Start(std::optional<absl::string_view> traceparent,
                            std::optional<absl::string_view> tracestate);

  // "00-<trace id>-<this call's span id>-<flags>", what the door sends back.
  absl::string_view traceparent() const { return {text_.data(), kTraceparentSize}; }
  absl::string_view trace_id_hex() const { return traceparent().substr(3, 32); }
  absl::string_view span_id_hex() const { return traceparent().substr(36, 16); }
  // The caller's span id in hex; "" when the call started a new trace.
  absl::string_view parent_span_id_hex() const {
    return has_parent_ ? absl::string_view(parent_hex_.data(), 16) : absl::string_view();
  }
  // The caller's tracestate, kept as it came ("" if none or too long).
  const std::string& tracestate() const { return tracestate_; }
  uint8_t flags() const { return flags_; }
  // Whether the caller asked for this trace to be recorded (flags bit 0);
  // a new trace is sampled.
  bool sampled() const { return (flags_ & 1) != 0; }

 private:
  TraceContext() = default;

  std::array<char, kTraceparentSize> text_{};
  std::array<char, 16> parent_hex_{};
  bool has_parent_ = false;
  uint8_t flags_ = 0;
  std::string tracestate_;
};

// What a call spent where, the stages the Prometheus histograms measure:
// queue (tensorops_queue_duration_seconds), kernel
// (tensorops_kernel_duration_seconds, which includes encoding the reply)
// and total (tensorops_request_duration_seconds: decode to reply). A stage
// the call never reached is absent.
struct ServerTiming {
  std::optional<absl::Duration> queue;
  std::optional<absl::Duration> kernel;
  absl::Duration total = absl::ZeroDuration();
};

// The Server-Timing header value (W3C Server Timing), milliseconds with
// microsecond resolution: "queue;dur=0.012, kernel;dur=2.310, total;dur=2.501".
std::string RenderServerTiming(const ServerTiming& timing);

// A fresh random id of 8 bytes, never all zeros (the spec forbids it);
// exposed for the span exporter and tests.
uint64_t NewSpanId();

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_TRACE_H_
