// W3C Trace Context (https://www.w3.org/TR/trace-context/) for one call, and
// the Server-Timing text of its stages, for every front door.
//
// A door hands the Call every `traceparent` and `tracestate` value the
// caller sent (gRPC metadata, HTTP header fields; CallContext). Exactly one
// valid traceparent makes the call a child of the caller's span: the trace
// id and the flags are kept and the caller's span id becomes the parent. A
// missing, malformed or repeated one (the spec: ignore it, never fail the
// call; the W3C test suite: two traceparent headers start a new trace)
// starts a new trace. Either way the call gets a span id of its own, and
// the door may send back the call's own traceparent
// ("00-<trace id>-<the call's span id>-<flags>"). The tracestate values
// are joined into one list and checked member by member (section 3.3):
// one bad member, a repeated key or more than 32 members and the whole
// tracestate is dropped, as the W3C test suite expects.
//
// Ids come from a per-thread xoshiro256** generator seeded once per thread
// from the OS: no lock, no allocation, a few nanoseconds per id (trace ids
// need to be unique, not secret). The text form lives in the object (a
// fixed 55-byte buffer): logging or sending it allocates nothing here.
//
// Example:
//   TraceContext t = TraceContext::Start(ctx.trace_fields());
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

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace tensorops {

// A traceparent's parts, as ParseTraceparent reads them.
struct TraceParent {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0;
};

// Every value of the caller's `traceparent` and `tracestate` fields, in the
// order received (views of the door's memory, valid while the RPC lives).
// Inline room for the usual one of each: filling it allocates nothing.
struct TraceFields {
  absl::InlinedVector<absl::string_view, 1> traceparent;
  absl::InlinedVector<absl::string_view, 1> tracestate;
};

// A `traceparent` header value checked as the spec's section 3.2 says,
// after dropping the spaces and tabs around it (HTTP's OWS): version 2
// lowercase hex, not "ff"; a trace id of 32 and a parent id of 16
// lowercase hex digits, neither all zeros; flags 2 hex digits; version 00
// exactly 55 characters, a later version at least that with a '-' after the
// flags if longer (its extra fields ignored). Anything else: nullopt.
std::optional<TraceParent> ParseTraceparent(absl::string_view text);

// The caller's `tracestate` values joined into one list (section 3.3.1.1:
// several fields are one list, in order) and checked: each list member is
// key "=" value, keys a simple-key (lcalpha then up to 255 of lcalpha,
// digits, "_-*/") or tenant@system (up to 241 and 14 characters), values
// 1 to 256 printable ASCII characters but ',' and '=', not ending in a
// space; spaces and tabs around members and empty members are ignored.
// A bad member, a key seen twice or more than 32 members: "" (the whole
// tracestate dropped). Longer than kMaxTracestate: members over 128
// characters go first, then members from the end (section 3.3.1.5).
// Members are joined with ',' in their order.
std::string JoinTracestate(absl::Span<const absl::string_view> values);

// The trace context of one call: its trace id, its own span id, its
// parent's (the caller's) span id if it had one, the flags, and the
// caller's tracestate passed along.
class TraceContext {
 public:
  static constexpr size_t kTraceparentSize = 55;  // "00-" 32 "-" 16 "-" 2
  // The longest tracestate kept (the spec's 32 list members of up to 256
  // characters would allow 16 KiB; 512 is what it asks vendors to
  // propagate at least). A longer one is cut as JoinTracestate says.
  static constexpr size_t kMaxTracestate = 512;
  // The most list members a tracestate may have (section 3.3.1.1).
  static constexpr size_t kMaxTracestateMembers = 32;

  // The call's context from what its caller sent.
  static TraceContext Start(const TraceFields& fields);

  // "00-<trace id>-<this call's span id>-<flags>", what the door sends back.
  absl::string_view traceparent() const { return {text_.data(), kTraceparentSize}; }
  absl::string_view trace_id_hex() const { return traceparent().substr(3, 32); }
  absl::string_view span_id_hex() const { return traceparent().substr(36, 16); }
  // Whether the call continues its caller's trace (one valid traceparent).
  bool has_parent() const { return has_parent_; }
  // The caller's span id in hex; "" when the call started a new trace.
  absl::string_view parent_span_id_hex() const {
    return has_parent_ ? absl::string_view(parent_hex_.data(), 16) : absl::string_view();
  }
  // The caller's tracestate as JoinTracestate kept it ("" if none).
  const std::string& tracestate() const { return tracestate_; }
  uint8_t flags() const { return flags_; }
  // Whether this trace is recorded (flags bit 0): the caller's choice for
  // a child, else the sampler's (a new trace is sampled unless
  // set_sampled(false) said otherwise).
  bool sampled() const { return (flags_ & 1) != 0; }
  // Whether the call arrived with a valid, sampled traceparent: a caller
  // that traces, who gets the call's traceparent and Server-Timing back.
  bool caller_sampled() const { return has_parent_ && sampled(); }
  // A new trace's sampling decision (a root span's sampler); a child's
  // flags are the caller's and stay (parent-based sampling).
  void set_sampled(bool sampled);

 private:
  TraceContext() = default;

  std::array<char, kTraceparentSize> text_{};
  std::array<char, 16> parent_hex_{};
  bool has_parent_ = false;
  uint8_t flags_ = 0;
  std::string tracestate_;
};

// Which calls' spans are recorded: OpenTelemetry's samplers, by the names
// OTEL_TRACES_SAMPLER takes. A root sampler decides a new trace's fate:
// always_on, always_off, or traceidratio (a trace id's last 8 bytes, read
// as a number, below ratio * 2^64: the same trace gets the same answer in
// every replica). Parent-based (the "parentbased_" names, and the default
// parentbased_always_on) follows the caller's sampled flag for a call that
// continues a trace and the root sampler only for new ones.
struct Sampler {
  enum class Root { kAlwaysOn, kAlwaysOff, kRatio };
  Root root = Root::kAlwaysOn;
  double ratio = 1.0;  // kRatio's, in [0, 1]
  bool parent_based = true;

  // Whether the call of `trace` is recorded.
  bool ShouldSample(const TraceContext& trace) const;
};

// A sampler from OTEL_TRACES_SAMPLER's `name` ("" the default,
// parentbased_always_on) and OTEL_TRACES_SAMPLER_ARG's `arg` (the ratio of
// the traceidratio samplers, "" = 1.0); INVALID_ARGUMENT naming the
// variable for an unknown name or a ratio outside [0, 1].
absl::StatusOr<Sampler> ParseSampler(absl::string_view name, absl::string_view arg);

// When a door sends a call's traceparent and Server-Timing back
// (CallPipeline::Options::trace_headers, --trace_headers).
enum class TraceHeaders {
  kAuto,  // when the call arrived with a sampled traceparent
  kOn,    // always
  kOff,   // never
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
