// All of tensorops' Prometheus metrics, in one place. Every metric child is
// created at start, in the constructor or when a door registers its rows
// (AddMethod, AddConnections); the per-request methods only touch
// pre-resolved pointers (no map lookups, no allocation, no Family::Add).
// The doors' rows are theirs: core/ names no door (the test
// core_names_no_door). Serving /metrics over HTTP is server/metrics_http/'s.
//
// Thread-safety: every method is safe from any thread after construction.
#ifndef TENSOROPS_SERVER_CORE_METRICS_H_
#define TENSOROPS_SERVER_CORE_METRICS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "kernels/op_registry.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace tensorops {

// absl::StatusCode's canonical codes, 0..16: the `code` label's values.
inline constexpr int kNumStatusCodes = 17;

// What a call method's two byte counts are (Metrics::RecordCall).
enum class CallBytes {
  kMessageSizes,  // request/answer sizes: tensorops_{request,response}_size_bytes
  kStreamBytes,   // tensor bytes received/sent: tensorops_stream_bytes_total
  kNone,          // neither (a method that names no op)
};

// How a method's server span is named and described: OpenTelemetry's
// semantic conventions for the door's protocol, which the door knows and
// core/ only writes out (span_export.h).
struct SpanConvention {
  std::string name;  // the span's name, e.g. "<package.Service>/<Method>"
  // Attributes every span of the method carries, e.g. the system and method.
  std::vector<std::pair<std::string, std::string>> attributes;
  // The attribute that carries the call's outcome as a number (empty: none),
  // and that number for a status code (null: the code's own number).
  std::string code_attribute;
  std::function<int(absl::StatusCode)> code_value;
  // Whether the conventions call the server span failed for a code (null:
  // never; a caller's mistake is usually not the server's failure).
  std::function<bool(absl::StatusCode)> failed;
};

// One call method of a front door, as the door registers it with
// Metrics::AddMethod at start. All that core/ says of a method is here, so
// core/ names no door: a new door registers its own rows.
struct CallMethodSpec {
  std::string name;  // the `method` label, the access log's method=, the span's name
  CallBytes bytes = CallBytes::kMessageSizes;
  // false: the method names no op; its children are under op="none" only
  // and RecordCall ignores the op index (nor counts it in ReadOpTotals).
  bool per_op = true;
  // The access log's names of the two byte counts.
  std::string log_bytes_in = "request_bytes";
  std::string log_bytes_out = "response_bytes";
  // Its server span, in the conventions of the door's protocol.
  SpanConvention span;
};

// A registered method and its metric children (every op, every code),
// made by Metrics::AddMethod and owned by the Metrics. Immutable once made:
// thread-safe.
class CallMethod {
 public:
  const CallMethodSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }

 private:
  friend class Metrics;
  explicit CallMethod(CallMethodSpec spec) : spec_(std::move(spec)) {}

  const CallMethodSpec spec_;
  // [op_index][code], op_index over known ops + unknown (one row: per_op false).
  std::vector<std::array<prometheus::Counter*, kNumStatusCodes>> requests_;
  std::vector<prometheus::Histogram*> duration_;
};

// A door's connections as /metrics shows them, as the door registers them
// with Metrics::AddConnections at start: a gauge of those open, and a
// counter of those it closed (or refused) itself, by reason.
struct ConnectionMetricsSpec {
  std::string open_name;  // the gauge
  std::string open_help;
  std::string closed_name;  // the counter, labelled `reason`
  std::string closed_help;
  std::vector<std::string> reasons;  // the `reason` values, indexed by the door's enum
};

// Made by Metrics::AddConnections and owned by the Metrics. Thread-safe.
class ConnectionMetrics {
 public:
  void SetOpen(int64_t open) const;
  // `reason` indexes ConnectionMetricsSpec::reasons; out of range: ignored.
  void RecordClosed(int reason) const;

 private:
  friend class Metrics;
  ConnectionMetrics() = default;

  prometheus::Gauge* open_ = nullptr;
  std::vector<prometheus::Counter*> closed_;
};

class Metrics {
 public:
  // `ops`: the canonical op names, used as the `op` label. Requests naming
  // anything else are recorded under op="unknown"; a method that names no
  // op (CallMethodSpec::per_op false) under op="none".
  explicit Metrics(const std::vector<std::string>& ops);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A door's call method, at start (before its first call): its rows in
  // tensorops_requests_total and tensorops_request_duration_seconds, at
  // zero. The same name again returns the method registered first (its spec
  // unchanged). The pointer lives as long as the Metrics.
  const CallMethod* AddMethod(CallMethodSpec spec);
  // A door's connection metrics, at start; the same open_name again returns
  // the ones registered first. The pointer lives as long as the Metrics.
  const ConnectionMetrics* AddConnections(const ConnectionMetricsSpec& spec);

  // Index for the per-op methods below; unknown names map to "unknown".
  // Resolve once per request (a small linear scan over the op names).
  int OpIndex(absl::string_view op) const;
  // The index of "unknown" (a call whose op is not known yet, or not at all).
  int unknown_op_index() const;

  // One finished call of `method` (AddMethod's): counts it under
  // (method, op, code) and observes its whole duration. The two byte counts
  // mean what the method's CallBytes says: message sizes (histograms), the
  // tensor bytes streamed (counters) or nothing.
  void RecordCall(const CallMethod* method, int op_index, absl::StatusCode code, double seconds,
                  int64_t bytes_in, int64_t bytes_out);
  // A call that reached its kernel: the time it held a queue slot (from
  // entering the queue until a thread took it), then the kernel's time.
  void RecordKernel(int op_index, double queue_seconds, double kernel_seconds);
  // Dropped after admission and before its kernel ran.
  enum class DropReason { kDeadline, kCancelled, kShutdown };
  void RecordDropped(int op_index, DropReason reason);
  // Refused by admission control.
  enum class Limit { kQueue, kInflightBytes };
  void RecordRejected(Limit limit);
  // A call that arrived as a retry of an earlier attempt (gRPC's
  // grpc-previous-rpc-attempts metadata): clients' retries, where they land.
  void RecordRetriedCall();
  // Spans of --otlp_endpoint's exporter (server/core/span_export.h): taken
  // by the collector, or dropped because the exporter's queue was full
  // (kQueueFull: the collector slower than the calls) or a POST failed or
  // timed out (kExportFailed: the collector gone or refusing).
  enum class SpanDrop { kQueueFull, kExportFailed };
  void RecordSpansExported(int64_t spans);
  void RecordSpansDropped(SpanDrop reason, int64_t spans);
  // The ops a chain ran after its first (each counted once per step).
  void RecordChainSteps(absl::Span<const OpDef* const> steps);

  // Admission control's state (its Observer): admitted calls, their bytes,
  // calls waiting in the queue.
  void SetAdmission(int64_t inflight_requests, int64_t inflight_bytes, int64_t queued);
  void SetPoolThreads(int64_t threads);
  // Registered system shared-memory regions (Open Inference Protocol).
  void SetSharedMemoryRegions(int64_t regions);
  // One op's numbers as /metrics shows them, summed over every front door
  // (for the Open Inference Protocol's ModelStatistics).
  struct OpTotals {
    uint64_t success_count = 0;  // tensorops_requests_total{op, code="OK"}
    uint64_t fail_count = 0;     // tensorops_requests_total{op, code!="OK"}
    double success_seconds = 0;  // tensorops_call_seconds_total{op, result="success"}
    double fail_seconds = 0;     // tensorops_call_seconds_total{op, result="fail"}
    uint64_t queue_count = 0;    // tensorops_queue_duration_seconds{op}: count, sum
    double queue_seconds = 0;
    uint64_t kernel_count = 0;  // tensorops_kernel_duration_seconds{op}: count, sum
    double kernel_seconds = 0;
    double last_call_unix_seconds = 0;  // tensorops_last_call_timestamp_seconds{op}
  };
  // `op_index` from OpIndex(); unknown ops give zeros.
  OpTotals ReadOpTotals(int op_index) const;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  struct Impl;
  // The constructor's steps, one per group of metric families (metrics.cc).
  static void BuildRequestFamilies(prometheus::Registry& registry, Impl& m);
  static void BuildStageFamilies(prometheus::Registry& registry, Impl& m);
  static void BuildAdmissionFamilies(prometheus::Registry& registry, Impl& m);
  static void BuildSpanAndChainCounters(prometheus::Registry& registry, Impl& m);
  static void BuildGauges(prometheus::Registry& registry, Impl& m);
  static void BuildCallTotals(prometheus::Registry& registry, Impl& m);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Impl> impl_;
  // What the doors registered; the pointers handed out stay put.
  mutable absl::Mutex registered_mu_;
  std::vector<std::unique_ptr<CallMethod>> methods_ ABSL_GUARDED_BY(registered_mu_);
  std::vector<std::pair<std::string, std::unique_ptr<ConnectionMetrics>>> connections_
      ABSL_GUARDED_BY(registered_mu_);
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_METRICS_H_
