// All of tensorops' Prometheus metrics, in one place. Every metric child is
// created in the constructor; the per-request methods only touch
// pre-resolved pointers (no map lookups, no allocation, no Family::Add).
//
// Thread-safety: every method is safe from any thread after construction.
#ifndef TENSOROPS_SERVER_METRICS_H_
#define TENSOROPS_SERVER_METRICS_H_

#include <grpcpp/support/status_code_enum.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace tensorops {

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

  // Index for the per-op methods below; unknown names map to "unknown".
  // Resolve once per request (a small linear scan over the op names).
  int OpIndex(absl::string_view op) const;
  // The index of "unknown" (a call whose op is not known yet, or not at all).
  int unknown_op_index() const;

  // One finished Execute: counts it under (op, code) and observes the whole
  // request duration and the request/response sizes.
  void RecordExecute(int op_index, grpc::StatusCode code, double seconds,
                     int64_t request_bytes, int64_t response_bytes);
  // One finished ExecuteStream: counts it under (method="ExecuteStream", op,
  // code), observes its duration and adds the tensor bytes it received and sent.
  void RecordExecuteStream(int op_index, grpc::StatusCode code, double seconds,
                           int64_t received_bytes, int64_t sent_bytes);
  // One finished ListOps.
  void RecordListOps(grpc::StatusCode code, double seconds);
  // An Execute or ExecuteStream that reached the kernel: time spent queued, time in the kernel.
  void RecordKernel(int op_index, double queue_seconds, double kernel_seconds);
  // Dropped after admission and before its kernel ran.
  enum class DropReason { kDeadline, kCancelled, kShutdown };
  void RecordDropped(int op_index, DropReason reason);
  // Refused by admission control.
  enum class Limit { kQueue, kInflightBytes };
  void RecordRejected(Limit limit);

  // Gauges the service keeps current.
  void AddInflightRequests(int64_t delta);
  void AddInflightBytes(int64_t delta);
  void SetQueueDepth(int64_t depth);
  void SetPoolThreads(int64_t threads);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  struct Impl;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_METRICS_H_
