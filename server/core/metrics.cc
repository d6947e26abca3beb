#include "server/core/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tensorops {
namespace {

// absl::StatusCode's canonical codes (gRPC's numbering) run 0..16 without
// gaps; the label is the code's name as Prometheus users know it from gRPC
// (upper snake case).
constexpr int kNumCodes = kNumStatusCodes;
constexpr std::array<const char*, kNumCodes> kCodeNames = {
    "OK",                   // 0
    "CANCELLED",            // 1
    "UNKNOWN",              // 2
    "INVALID_ARGUMENT",     // 3
    "DEADLINE_EXCEEDED",    // 4
    "NOT_FOUND",            // 5
    "ALREADY_EXISTS",       // 6
    "PERMISSION_DENIED",    // 7
    "RESOURCE_EXHAUSTED",   // 8
    "FAILED_PRECONDITION",  // 9
    "ABORTED",              // 10
    "OUT_OF_RANGE",         // 11
    "UNIMPLEMENTED",        // 12
    "INTERNAL",             // 13
    "UNAVAILABLE",          // 14
    "DATA_LOSS",            // 15
    "UNAUTHENTICATED",      // 16
};
// The table above is indexed by the enum value: let the compiler check it.
static_assert(static_cast<int>(absl::StatusCode::kOk) == 0);
static_assert(static_cast<int>(absl::StatusCode::kCancelled) == 1);
static_assert(static_cast<int>(absl::StatusCode::kUnknown) == 2);
static_assert(static_cast<int>(absl::StatusCode::kInvalidArgument) == 3);
static_assert(static_cast<int>(absl::StatusCode::kDeadlineExceeded) == 4);
static_assert(static_cast<int>(absl::StatusCode::kNotFound) == 5);
static_assert(static_cast<int>(absl::StatusCode::kAlreadyExists) == 6);
static_assert(static_cast<int>(absl::StatusCode::kPermissionDenied) == 7);
static_assert(static_cast<int>(absl::StatusCode::kResourceExhausted) == 8);
static_assert(static_cast<int>(absl::StatusCode::kFailedPrecondition) == 9);
static_assert(static_cast<int>(absl::StatusCode::kAborted) == 10);
static_assert(static_cast<int>(absl::StatusCode::kOutOfRange) == 11);
static_assert(static_cast<int>(absl::StatusCode::kUnimplemented) == 12);
static_assert(static_cast<int>(absl::StatusCode::kInternal) == 13);
static_assert(static_cast<int>(absl::StatusCode::kUnavailable) == 14);
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) == 15);
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == 16);

constexpr int kNumDropReasons = 3;
constexpr std::array<const char*, kNumDropReasons> kDropReasonNames = {"deadline", "cancelled",
                                                                       "shutdown"};
static_assert(static_cast<int>(Metrics::DropReason::kDeadline) == 0);
static_assert(static_cast<int>(Metrics::DropReason::kCancelled) == 1);
static_assert(static_cast<int>(Metrics::DropReason::kShutdown) == 2);

constexpr int kNumLimits = 2;
constexpr std::array<const char*, kNumLimits> kLimitNames = {"queue", "inflight_bytes"};
static_assert(static_cast<int>(Metrics::Limit::kQueue) == 0);
static_assert(static_cast<int>(Metrics::Limit::kInflightBytes) == 1);

constexpr int kNumSpanDrops = 2;
constexpr std::array<const char*, kNumSpanDrops> kSpanDropNames = {"queue_full", "export_failed"};
static_assert(static_cast<int>(Metrics::SpanDrop::kQueueFull) == 0);
static_assert(static_cast<int>(Metrics::SpanDrop::kExportFailed) == 1);

constexpr char kUnknownOp[] = "unknown";
constexpr char kNoOp[] = "none";
// 5 us .. 10 s: a small memcpy-bound op takes microseconds, a big one or a
// long queue wait takes seconds.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  return {5e-6, 1e-5,  2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
          0.01, 0.025, 0.05,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
}

// 64 B .. 1 GiB in powers of 4.
prometheus::Histogram::BucketBoundaries SizeBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (int64_t b = 64; b <= (int64_t{1} << 30); b *= 4) buckets.push_back(static_cast<double>(b));
  return buckets;
}

int CodeIndex(absl::StatusCode code) {
  const int i = static_cast<int>(code);
  // Codes outside the canonical ones (absl allows any int) count as
  // UNKNOWN rather than index out of bounds.
  return (i >= 0 && i < kNumCodes) ? i : static_cast<int>(absl::StatusCode::kUnknown);
}

}  // namespace

struct Metrics::Impl {
  // ops.size() known ops, then "unknown" at index ops.size().
  std::vector<std::string> op_names;
  int unknown_index = 0;

  // The per-method families; the doors' methods add their children.
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Family<prometheus::Histogram>* duration = nullptr;
  // [op_index]: tensor bytes streamed in and out.
  std::vector<prometheus::Counter*> stream_received;
  std::vector<prometheus::Counter*> stream_sent;
  std::vector<prometheus::Histogram*> request_size;
  std::vector<prometheus::Histogram*> response_size;
  // [op_index], known ops only: unknown ops never reach the queue.
  std::vector<prometheus::Histogram*> queue_duration;
  std::vector<prometheus::Histogram*> kernel_duration;
  std::vector<std::array<prometheus::Counter*, kNumDropReasons>> dropped;
  std::array<prometheus::Counter*, kNumLimits> rejected{};
  prometheus::Counter* retried_calls = nullptr;
  prometheus::Counter* spans_exported = nullptr;
  std::array<prometheus::Counter*, kNumSpanDrops> spans_dropped{};
  // [op_index], known ops only: ops run as chain steps after the first.
  std::vector<prometheus::Counter*> chain_steps;
  prometheus::Gauge* inflight_requests = nullptr;
  prometheus::Gauge* inflight_bytes = nullptr;
  prometheus::Gauge* queue_depth = nullptr;
  prometheus::Gauge* pool_threads = nullptr;
  prometheus::Gauge* shm_regions = nullptr;
  // [op_index], known ops + unknown: [0] success, [1] fail.
  std::vector<std::array<prometheus::Counter*, 2>> call_seconds;
  std::vector<prometheus::Gauge*> last_call;

  // Any index from OpIndex() is valid; clamp anything else to "unknown".
  int AnyOp(int op_index) const {
    return (op_index >= 0 && op_index <= unknown_index) ? op_index : unknown_index;
  }
  bool KnownOp(int op_index) const { return op_index >= 0 && op_index < unknown_index; }
};

// Finished calls and their latency, per method, op and code: the families
// here, their children as each door registers its methods (AddMethod).
void Metrics::BuildRequestFamilies(prometheus::Registry& registry, Impl& m) {
  m.requests = &prometheus::BuildCounter()
                    .Name("tensorops_requests_total")
                    .Help(
                        "Finished calls by method, op (\"unknown\" for an op name the "
                        "server does not know, \"none\" for a method that names no op) and "
                        "status code.")
                    .Register(registry);
  m.duration = &prometheus::BuildHistogram()
                    .Name("tensorops_request_duration_seconds")
                    .Help(
                        "Whole-call latency in seconds, from the door receiving the request to "
                        "the answer being handed to its transport (decode, queue, kernel, "
                        "encode).")
                    .Register(registry);
}

// Stream bytes, queue and kernel time, message sizes, per op.
void Metrics::BuildStageFamilies(prometheus::Registry& registry, Impl& m) {
  const size_t num_any = m.op_names.size();
  auto& stream_bytes = prometheus::BuildCounter()
                           .Name("tensorops_stream_bytes_total")
                           .Help(
                               "Tensor bytes of streamed calls, by op and direction "
                               "(received: input chunks; sent: output chunks).")
                           .Register(registry);
  for (size_t op = 0; op < num_any; ++op) {
    m.stream_received.push_back(
        &stream_bytes.Add({{"op", m.op_names[op]}, {"direction", "received"}}));
    m.stream_sent.push_back(&stream_bytes.Add({{"op", m.op_names[op]}, {"direction", "sent"}}));
  }

  auto& queue_duration = prometheus::BuildHistogram()
                             .Name("tensorops_queue_duration_seconds")
                             .Help(
                                 "Seconds a call held a queue slot: from entering the queue "
                                 "(a unary call: when admitted; a streamed call: when its upload "
                                 "completed) until a kernel-pool thread took it.")
                             .Register(registry);
  auto& kernel_duration = prometheus::BuildHistogram()
                              .Name("tensorops_kernel_duration_seconds")
                              .Help(
                                  "Seconds the kernel of a call ran (all pool threads "
                                  "together, wall clock).")
                              .Register(registry);
  for (int op = 0; op < m.unknown_index; ++op) {
    m.queue_duration.push_back(&queue_duration.Add({{"op", m.op_names[op]}}, DurationBuckets()));
    m.kernel_duration.push_back(&kernel_duration.Add({{"op", m.op_names[op]}}, DurationBuckets()));
  }

  auto& request_size = prometheus::BuildHistogram()
                           .Name("tensorops_request_size_bytes")
                           .Help("Size in bytes of each unary call's request (message or body).")
                           .Register(registry);
  auto& response_size = prometheus::BuildHistogram()
                            .Name("tensorops_response_size_bytes")
                            .Help(
                                "Size in bytes of each unary call's answer (message or body; "
                                "0 when the call failed).")
                            .Register(registry);
  for (size_t op = 0; op < num_any; ++op) {
    m.request_size.push_back(&request_size.Add({{"op", m.op_names[op]}}, SizeBuckets()));
    m.response_size.push_back(&response_size.Add({{"op", m.op_names[op]}}, SizeBuckets()));
  }
}

// Calls dropped or refused, and retries that landed here.
void Metrics::BuildAdmissionFamilies(prometheus::Registry& registry, Impl& m) {
  auto& dropped = prometheus::BuildCounter()
                      .Name("tensorops_dropped_requests_total")
                      .Help(
                          "Calls admitted to the queue but dropped before their "
                          "kernel ran, by op and reason (deadline passed, client "
                          "cancelled, server shutting down).")
                      .Register(registry);
  m.dropped.resize(m.unknown_index);
  for (int op = 0; op < m.unknown_index; ++op) {
    for (int r = 0; r < kNumDropReasons; ++r) {
      m.dropped[op][r] = &dropped.Add({{"op", m.op_names[op]}, {"reason", kDropReasonNames[r]}});
    }
  }

  auto& rejected = prometheus::BuildCounter()
                       .Name("tensorops_rejected_requests_total")
                       .Help(
                           "Calls refused by admission control with "
                           "RESOURCE_EXHAUSTED, by the limit that was hit (queue length "
                           "or in-flight bytes).")
                       .Register(registry);
  for (int l = 0; l < kNumLimits; ++l) {
    m.rejected[l] = &rejected.Add({{"limit", kLimitNames[l]}});
  }

  m.retried_calls = &prometheus::BuildCounter()
                         .Name("tensorops_retried_calls_total")
                         .Help(
                             "Calls that arrived as a client's retry of an earlier attempt "
                             "(marked so by the caller), counted where "
                             "they land.")
                         .Register(registry)
                         .Add({});
}

// Spans exported or dropped (--otlp_endpoint), and chain steps per op.
void Metrics::BuildSpanAndChainCounters(prometheus::Registry& registry, Impl& m) {
  m.spans_exported = &prometheus::BuildCounter()
                          .Name("tensorops_spans_exported_total")
                          .Help(
                              "Call spans the OTLP collector (--otlp_endpoint) took; 0 "
                              "without one.")
                          .Register(registry)
                          .Add({});
  auto& spans_dropped = prometheus::BuildCounter()
                            .Name("tensorops_spans_dropped_total")
                            .Help(
                                "Call spans not exported to --otlp_endpoint, by reason: "
                                "queue_full (the collector slower than the calls), "
                                "export_failed (a POST failed or timed out).")
                            .Register(registry);
  for (int r = 0; r < kNumSpanDrops; ++r) {
    m.spans_dropped[r] = &spans_dropped.Add({{"reason", kSpanDropNames[r]}});
  }

  auto& chain_steps = prometheus::BuildCounter()
                          .Name("tensorops_chain_steps_total")
                          .Help(
                              "Ops that ran as steps of a chain after its first op (the call "
                              "itself counts once, under its first op).")
                          .Register(registry);
  for (int op = 0; op < m.unknown_index; ++op) {
    m.chain_steps.push_back(&chain_steps.Add({{"op", m.op_names[op]}}));
  }
}

// In-flight work, queue depth, pool size, shared-memory regions.
void Metrics::BuildGauges(prometheus::Registry& registry, Impl& m) {
  m.inflight_requests = &prometheus::BuildGauge()
                             .Name("tensorops_inflight_requests")
                             .Help(
                                 "Calls admitted and not yet finished "
                                 "(queued or running).")
                             .Register(registry)
                             .Add({});
  m.inflight_bytes = &prometheus::BuildGauge()
                          .Name("tensorops_inflight_bytes")
                          .Help(
                              "Bytes of tensor data held by admitted, unfinished "
                              "requests (the quantity the in-flight bytes limit bounds).")
                          .Register(registry)
                          .Add({});
  m.queue_depth = &prometheus::BuildGauge()
                       .Name("tensorops_queue_depth")
                       .Help("Calls waiting in the queue for a kernel-pool thread.")
                       .Register(registry)
                       .Add({});
  m.pool_threads = &prometheus::BuildGauge()
                        .Name("tensorops_pool_threads")
                        .Help("Threads in the kernel thread pool.")
                        .Register(registry)
                        .Add({});
  m.shm_regions = &prometheus::BuildGauge()
                       .Name("tensorops_shared_memory_regions")
                       .Help(
                           "System shared-memory regions registered through the Open "
                           "Inference Protocol (--shared_memory=system).")
                       .Register(registry)
                       .Add({});
}

// Cumulative call seconds and the last call per op (ModelStatistics).
void Metrics::BuildCallTotals(prometheus::Registry& registry, Impl& m) {
  const size_t num_any = m.op_names.size();
  auto& call_seconds = prometheus::BuildCounter()
                           .Name("tensorops_call_seconds_total")
                           .Help(
                               "Cumulative whole-call seconds of finished calls of every front "
                               "door, by op and result (success: OK; fail: any other code). "
                               "ModelStatistics reports these.")
                           .Register(registry);
  auto& last_call = prometheus::BuildGauge()
                        .Name("tensorops_last_call_timestamp_seconds")
                        .Help("Unix time at which the last call of each op finished.")
                        .Register(registry);
  for (size_t op = 0; op < num_any; ++op) {
    m.call_seconds.push_back({&call_seconds.Add({{"op", m.op_names[op]}, {"result", "success"}}),
                              &call_seconds.Add({{"op", m.op_names[op]}, {"result", "fail"}})});
    m.last_call.push_back(&last_call.Add({{"op", m.op_names[op]}}));
  }
}

Metrics::Metrics(const std::vector<std::string>& ops)
    : registry_(std::make_shared<prometheus::Registry>()), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.op_names = ops;
  m.unknown_index = static_cast<int>(ops.size());
  m.op_names.push_back(kUnknownOp);
  // Registered in this order, which is the order /metrics lists them in.
  BuildRequestFamilies(*registry_, m);
  BuildStageFamilies(*registry_, m);
  BuildAdmissionFamilies(*registry_, m);
  BuildSpanAndChainCounters(*registry_, m);
  BuildGauges(*registry_, m);
  BuildCallTotals(*registry_, m);
}

Metrics::~Metrics() = default;

int Metrics::OpIndex(absl::string_view op) const {
  for (int i = 0; i < impl_->unknown_index; ++i) {
    if (impl_->op_names[i] == op) return i;
  }
  return impl_->unknown_index;
}

int Metrics::unknown_op_index() const { return impl_->unknown_index; }

const CallMethod* Metrics::AddMethod(CallMethodSpec spec) {
  absl::MutexLock lock(&registered_mu_);
  for (const std::unique_ptr<CallMethod>& m : methods_) {
    if (m->name() == spec.name) return m.get();
  }
  std::unique_ptr<CallMethod> method(new CallMethod(std::move(spec)));
  const std::string& name = method->name();
  if (method->spec().per_op) {
    for (const std::string& op : impl_->op_names) {
      std::array<prometheus::Counter*, kNumCodes>& codes = method->requests_.emplace_back();
      for (int code = 0; code < kNumCodes; ++code) {
        codes[code] =
            &impl_->requests->Add({{"method", name}, {"op", op}, {"code", kCodeNames[code]}});
      }
      method->duration_.push_back(
          &impl_->duration->Add({{"method", name}, {"op", op}}, DurationBuckets()));
    }
  } else {
    std::array<prometheus::Counter*, kNumCodes>& codes = method->requests_.emplace_back();
    for (int code = 0; code < kNumCodes; ++code) {
      codes[code] =
          &impl_->requests->Add({{"method", name}, {"op", kNoOp}, {"code", kCodeNames[code]}});
    }
    method->duration_.push_back(
        &impl_->duration->Add({{"method", name}, {"op", kNoOp}}, DurationBuckets()));
  }
  methods_.push_back(std::move(method));
  return methods_.back().get();
}

const ConnectionMetrics* Metrics::AddConnections(const ConnectionMetricsSpec& spec) {
  absl::MutexLock lock(&registered_mu_);
  for (const auto& [name, c] : connections_) {
    if (name == spec.open_name) return c.get();
  }
  std::unique_ptr<ConnectionMetrics> c(new ConnectionMetrics());
  c->open_ = &prometheus::BuildGauge()
                  .Name(spec.open_name)
                  .Help(spec.open_help)
                  .Register(*registry_)
                  .Add({});
  auto& closed =
      prometheus::BuildCounter().Name(spec.closed_name).Help(spec.closed_help).Register(*registry_);
  for (const std::string& reason : spec.reasons) {
    c->closed_.push_back(&closed.Add({{"reason", reason}}));
  }
  connections_.emplace_back(spec.open_name, std::move(c));
  return connections_.back().second.get();
}

void ConnectionMetrics::SetOpen(int64_t open) const { open_->Set(static_cast<double>(open)); }

void ConnectionMetrics::RecordClosed(int reason) const {
  if (reason < 0 || reason >= static_cast<int>(closed_.size())) return;
  closed_[reason]->Increment();
}

void Metrics::RecordCall(const CallMethod* method, int op_index, absl::StatusCode code,
                         double seconds, int64_t bytes_in, int64_t bytes_out) {
  if (!method->spec().per_op) {
    method->requests_[0][CodeIndex(code)]->Increment();
    method->duration_[0]->Observe(seconds);
    return;
  }
  const int op = impl_->AnyOp(op_index);
  method->requests_[op][CodeIndex(code)]->Increment();
  method->duration_[op]->Observe(seconds);
  impl_->call_seconds[op][code == absl::StatusCode::kOk ? 0 : 1]->Increment(seconds);
  impl_->last_call[op]->SetToCurrentTime();
  switch (method->spec().bytes) {
    case CallBytes::kMessageSizes:
      impl_->request_size[op]->Observe(static_cast<double>(bytes_in));
      impl_->response_size[op]->Observe(static_cast<double>(bytes_out));
      break;
    case CallBytes::kStreamBytes:
      impl_->stream_received[op]->Increment(static_cast<double>(bytes_in));
      impl_->stream_sent[op]->Increment(static_cast<double>(bytes_out));
      break;
    case CallBytes::kNone:
      break;
  }
}

void Metrics::RecordKernel(int op_index, double queue_seconds, double kernel_seconds) {
  // Unknown ops never reach a kernel and have no child here.
  if (!impl_->KnownOp(op_index)) return;
  impl_->queue_duration[op_index]->Observe(queue_seconds);
  impl_->kernel_duration[op_index]->Observe(kernel_seconds);
}

void Metrics::RecordDropped(int op_index, DropReason reason) {
  // Unknown ops are refused before admission, so they cannot be dropped.
  if (!impl_->KnownOp(op_index)) return;
  const int r = static_cast<int>(reason);
  if (r < 0 || r >= kNumDropReasons) return;
  impl_->dropped[op_index][r]->Increment();
}

void Metrics::RecordRejected(Limit limit) {
  const int l = static_cast<int>(limit);
  if (l < 0 || l >= kNumLimits) return;
  impl_->rejected[l]->Increment();
}

void Metrics::RecordRetriedCall() { impl_->retried_calls->Increment(); }

void Metrics::RecordSpansExported(int64_t spans) {
  impl_->spans_exported->Increment(static_cast<double>(spans));
}

void Metrics::RecordSpansDropped(SpanDrop reason, int64_t spans) {
  const int r = static_cast<int>(reason);
  if (r < 0 || r >= kNumSpanDrops) return;
  impl_->spans_dropped[r]->Increment(static_cast<double>(spans));
}

void Metrics::RecordChainSteps(absl::Span<const OpDef* const> steps) {
  for (const OpDef* def : steps) {
    const int op = OpIndex(def->spec.name);
    if (op < impl_->unknown_index) impl_->chain_steps[op]->Increment();
  }
}

void Metrics::SetAdmission(int64_t inflight_requests, int64_t inflight_bytes, int64_t queued) {
  impl_->inflight_requests->Set(static_cast<double>(inflight_requests));
  impl_->inflight_bytes->Set(static_cast<double>(inflight_bytes));
  impl_->queue_depth->Set(static_cast<double>(queued));
}

void Metrics::SetPoolThreads(int64_t threads) {
  impl_->pool_threads->Set(static_cast<double>(threads));
}

void Metrics::SetSharedMemoryRegions(int64_t regions) {
  impl_->shm_regions->Set(static_cast<double>(regions));
}

Metrics::OpTotals Metrics::ReadOpTotals(int op_index) const {
  OpTotals t;
  if (!impl_->KnownOp(op_index)) return t;
  {
    absl::MutexLock lock(&registered_mu_);
    for (const std::unique_ptr<CallMethod>& m : methods_) {
      if (!m->spec().per_op) continue;
      for (int code = 0; code < kNumCodes; ++code) {
        const auto n = static_cast<uint64_t>(m->requests_[op_index][code]->Value());
        (code == 0 ? t.success_count : t.fail_count) += n;
      }
    }
  }
  t.success_seconds = impl_->call_seconds[op_index][0]->Value();
  t.fail_seconds = impl_->call_seconds[op_index][1]->Value();
  const prometheus::ClientMetric queue = impl_->queue_duration[op_index]->Collect();
  t.queue_count = queue.histogram.sample_count;
  t.queue_seconds = queue.histogram.sample_sum;
  const prometheus::ClientMetric kernel = impl_->kernel_duration[op_index]->Collect();
  t.kernel_count = kernel.histogram.sample_count;
  t.kernel_seconds = kernel.histogram.sample_sum;
  t.last_call_unix_seconds = impl_->last_call[op_index]->Value();
  return t;
}

}  // namespace tensorops
