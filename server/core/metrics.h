// All of tensorops' Prometheus metrics, in one place. Every metric child is
// created in the constructor; the per-request methods only touch
// pre-resolved pointers (no map lookups, no allocation, no Family::Add).
//
// Thread-safety: every method is safe from any thread after construction.
#ifndef TENSOROPS_SERVER_CORE_METRICS_H_
#define TENSOROPS_SERVER_CORE_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/op_registry.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace tensorops {

// The front doors of the service: the `method` label of per-call metrics and
// the index of their metric children. A new front door adds a value here and
// a row to kMethods in metrics.cc.
enum class CallMethod {
  kExecute = 0,
  kExecuteStream = 1,
  kModelInfer = 2,
  kModelStreamInfer = 3,
  kRest = 4,  // the Open Inference Protocol's infer over HTTP (server/http/)
};
inline constexpr int kNumCallMethods = 5;
// "Execute", "ExecuteStream" (the gRPC method name).
const char* CallMethodName(CallMethod method);

class Metrics {
 public:
  // `ops`: the canonical op names, used as the `op` label. Requests naming
  // anything else are recorded under op="unknown"; ListOps under op="none".
  explicit Metrics(const std::vector<std::string>& ops);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves GET /metrics on host:port (port 0 picks a free one). Returns the
  // bound port. At most once.
  absl::StatusOr<int> StartHttp(const std::string& host, int port);
  // Stops serving /metrics (the destructor does too), within milliseconds.
  void StopHttp();

  // Index for the per-op methods below; unknown names map to "unknown".
  // Resolve once per request (a small linear scan over the op names).
  int OpIndex(absl::string_view op) const;
  // The index of "unknown" (a call whose op is not known yet, or not at all).
  int unknown_op_index() const;

  // One finished call of a front door (see CallMethod): counts it under
  // (method, op, code) and observes its whole duration. The two byte counts
  // mean what the method's row in metrics.cc says: for Execute the request and
  // response message sizes (histograms), for ExecuteStream the tensor bytes
  // received and sent (counters).
  void RecordCall(CallMethod method, int op_index, absl::StatusCode code, double seconds,
                  int64_t bytes_in, int64_t bytes_out);
  // One finished ListOps.
  void RecordListOps(absl::StatusCode code, double seconds);
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
  // The gRPC door's plaintext connections (server/grpc/grpc_listener.h):
  // open now, and closed at accept, over --grpc_max_connections (kCap) or
  // for want of file descriptors (kEmfile: EMFILE/ENFILE).
  void SetGrpcConnections(int64_t connections);
  enum class ConnectionRefusal { kCap, kEmfile };
  void RecordGrpcConnectionRefused(ConnectionRefusal reason);

  // The HTTP/REST door's connections (server/http/): how many are open, and
  // those the door closed itself, by why (tensorops_http_connections_closed_total).
  enum class HttpClose {
    kCapIdle,        // idle, closed to make room for a new one at --http_max_connections
    kCapRefused,     // new, refused (503 or closed at once): at the cap, none idle
    kHeaderTimeout,  // no whole request header within --http_header_timeout
    kIdleTimeout,    // keep-alive, no next request within --http_idle_timeout
    kBodyRate,       // body slower than --http_min_body_rate
    kNoDescriptors,  // accepted and closed at once while the process was out of fds
  };
  void SetHttpConnections(int64_t open);
  void RecordHttpClosed(HttpClose reason);

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
  static void BuildConnectionFamilies(prometheus::Registry& registry, Impl& m);
  static void BuildCallTotals(prometheus::Registry& registry, Impl& m);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string http_host_;  // as StartHttp was given it
  int http_port_ = -1;     // bound
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_METRICS_H_
