#include "server/core/metrics.h"

#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tensorops {
namespace {

// absl::StatusCode's canonical codes (gRPC's numbering) run 0..16 without
// gaps; the label is the code's name as Prometheus users know it from gRPC
// (upper snake case).
constexpr int kNumCodes = 17;
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

constexpr int kNumConnectionRefusals = 2;
constexpr std::array<const char*, kNumConnectionRefusals> kConnectionRefusalNames = {"cap",
                                                                                     "emfile"};
static_assert(static_cast<int>(Metrics::ConnectionRefusal::kCap) == 0);
static_assert(static_cast<int>(Metrics::ConnectionRefusal::kEmfile) == 1);

constexpr int kNumHttpCloses = 6;
constexpr std::array<const char*, kNumHttpCloses> kHttpCloseNames = {
    "cap_idle", "cap_refused", "header_timeout", "idle_timeout", "body_rate", "no_descriptors"};
static_assert(static_cast<int>(Metrics::HttpClose::kCapIdle) == 0);
static_assert(static_cast<int>(Metrics::HttpClose::kCapRefused) == 1);
static_assert(static_cast<int>(Metrics::HttpClose::kHeaderTimeout) == 2);
static_assert(static_cast<int>(Metrics::HttpClose::kIdleTimeout) == 3);
static_assert(static_cast<int>(Metrics::HttpClose::kBodyRate) == 4);
static_assert(static_cast<int>(Metrics::HttpClose::kNoDescriptors) == 5);

constexpr int kNumSpanDrops = 2;
constexpr std::array<const char*, kNumSpanDrops> kSpanDropNames = {"queue_full", "export_failed"};
static_assert(static_cast<int>(Metrics::SpanDrop::kQueueFull) == 0);
static_assert(static_cast<int>(Metrics::SpanDrop::kExportFailed) == 1);

constexpr char kUnknownOp[] = "unknown";
constexpr char kNoOp[] = "none";
constexpr char kListOps[] = "ListOps";

// What RecordCall's two byte counts are for a front door.
enum class BytesKind {
  kMessageSizes,  // request/response message sizes: tensorops_{request,response}_size_bytes
  kStreamBytes,   // tensor bytes received/sent: tensorops_stream_bytes_total
};
struct MethodRow {
  CallMethod method;
  const char* name;
  BytesKind bytes;
};
constexpr std::array<MethodRow, kNumCallMethods> kMethods = {{
    {CallMethod::kExecute, "Execute", BytesKind::kMessageSizes},
    {CallMethod::kExecuteStream, "ExecuteStream", BytesKind::kStreamBytes},
    {CallMethod::kModelInfer, "ModelInfer", BytesKind::kMessageSizes},
    // One call per request message of the stream.
    {CallMethod::kModelStreamInfer, "ModelStreamInfer", BytesKind::kMessageSizes},
    // POST /v2/models/{m}/infer: body and answer sizes.
    {CallMethod::kRest, "REST", BytesKind::kMessageSizes},
}};
constexpr bool MethodsInOrder() {
  for (int i = 0; i < kNumCallMethods; ++i) {
    if (static_cast<int>(kMethods[i].method) != i) return false;
  }
  return true;
}
static_assert(MethodsInOrder(), "kMethods is indexed by CallMethod");

int MethodIndex(CallMethod method) {
  const int i = static_cast<int>(method);
  return (i >= 0 && i < kNumCallMethods) ? i : 0;
}

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

  // [method][op_index][code], op_index over known ops + unknown.
  std::array<std::vector<std::array<prometheus::Counter*, kNumCodes>>, kNumCallMethods> requests;
  std::array<prometheus::Counter*, kNumCodes> list_ops_requests{};
  // [method][op_index], known ops + unknown.
  std::array<std::vector<prometheus::Histogram*>, kNumCallMethods> duration;
  // [op_index]: tensor bytes streamed in and out.
  std::vector<prometheus::Counter*> stream_received;
  std::vector<prometheus::Counter*> stream_sent;
  prometheus::Histogram* list_ops_duration = nullptr;
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
  prometheus::Gauge* grpc_connections = nullptr;
  std::array<prometheus::Counter*, kNumConnectionRefusals> grpc_connections_refused{};
  prometheus::Gauge* http_connections = nullptr;
  std::array<prometheus::Counter*, kNumHttpCloses> http_closed{};
  // [op_index], known ops + unknown: [0] success, [1] fail.
  std::vector<std::array<prometheus::Counter*, 2>> call_seconds;
  std::vector<prometheus::Gauge*> last_call;

  // Any index from OpIndex() is valid; clamp anything else to "unknown".
  int AnyOp(int op_index) const {
    return (op_index >= 0 && op_index <= unknown_index) ? op_index : unknown_index;
  }
  bool KnownOp(int op_index) const { return op_index >= 0 && op_index < unknown_index; }
};

// Finished calls and their latency, per door method, op and code.
void Metrics::BuildRequestFamilies(prometheus::Registry& registry, Impl& m) {
  const size_t num_any = m.op_names.size();
  auto& requests = prometheus::BuildCounter()
                       .Name("tensorops_requests_total")
                       .Help(
                           "Finished RPCs by method, op (\"unknown\" for an op name the "
                           "server does not know, \"none\" for ListOps) and gRPC status code.")
                       .Register(registry);
  for (int method = 0; method < kNumCallMethods; ++method) {
    m.requests[method].resize(num_any);
    for (size_t op = 0; op < num_any; ++op) {
      for (int code = 0; code < kNumCodes; ++code) {
        m.requests[method][op][code] = &requests.Add({{"method", kMethods[method].name},
                                                      {"op", m.op_names[op]},
                                                      {"code", kCodeNames[code]}});
      }
    }
  }
  for (int code = 0; code < kNumCodes; ++code) {
    m.list_ops_requests[code] =
        &requests.Add({{"method", kListOps}, {"op", kNoOp}, {"code", kCodeNames[code]}});
  }

  auto& request_duration =
      prometheus::BuildHistogram()
          .Name("tensorops_request_duration_seconds")
          .Help(
              "Whole-RPC latency in seconds, from the handler receiving the request to "
              "the response being handed to gRPC (decode, queue, kernel, encode).")
          .Register(registry);
  for (int method = 0; method < kNumCallMethods; ++method) {
    for (size_t op = 0; op < num_any; ++op) {
      m.duration[method].push_back(&request_duration.Add(
          {{"method", kMethods[method].name}, {"op", m.op_names[op]}}, DurationBuckets()));
    }
  }
  m.list_ops_duration =
      &request_duration.Add({{"method", kListOps}, {"op", kNoOp}}, DurationBuckets());
}

// Stream bytes, queue and kernel time, message sizes, per op.
void Metrics::BuildStageFamilies(prometheus::Registry& registry, Impl& m) {
  const size_t num_any = m.op_names.size();
  auto& stream_bytes = prometheus::BuildCounter()
                           .Name("tensorops_stream_bytes_total")
                           .Help(
                               "Tensor bytes of ExecuteStream calls, by op and direction "
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
                                 "(Execute: when admitted; ExecuteStream: when its upload "
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
                           .Help("Size in bytes of each Execute and ModelInfer request message.")
                           .Register(registry);
  auto& response_size = prometheus::BuildHistogram()
                            .Name("tensorops_response_size_bytes")
                            .Help(
                                "Size in bytes of each Execute and ModelInfer response message "
                                "(0 when the RPC failed).")
                            .Register(registry);
  for (size_t op = 0; op < num_any; ++op) {
    m.request_size.push_back(&request_size.Add({{"op", m.op_names[op]}}, SizeBuckets()));
    m.response_size.push_back(&response_size.Add({{"op", m.op_names[op]}}, SizeBuckets()));
  }
}

// Calls dropped or refused, and retries that landed here.
void Metrics::BuildAdmissionFamilies(prometheus::Registry& registry, Impl& m) {
  auto& dropped =
      prometheus::BuildCounter()
          .Name("tensorops_dropped_requests_total")
          .Help(
              "Execute and ExecuteStream calls admitted to the queue but dropped before their "
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
                           "Execute and ExecuteStream calls refused by admission control with "
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
                             "(gRPC's grpc-previous-rpc-attempts metadata), counted where "
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
                                 "Execute and ExecuteStream calls admitted and not yet finished "
                                 "(queued or running).")
                             .Register(registry)
                             .Add({});
  m.inflight_bytes = &prometheus::BuildGauge()
                          .Name("tensorops_inflight_bytes")
                          .Help(
                              "Bytes of tensor data held by admitted, unfinished Execute "
                              "requests (the quantity the in-flight bytes limit bounds).")
                          .Register(registry)
                          .Add({});
  m.queue_depth =
      &prometheus::BuildGauge()
           .Name("tensorops_queue_depth")
           .Help("Execute and ExecuteStream calls waiting in the queue for a kernel-pool thread.")
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

// Each door's connections and the ones it closed or refused.
void Metrics::BuildConnectionFamilies(prometheus::Registry& registry, Impl& m) {
  m.http_connections = &prometheus::BuildGauge()
                            .Name("tensorops_http_connections")
                            .Help(
                                "Connections open on the HTTP/REST port (capped by "
                                "--http_max_connections).")
                            .Register(registry)
                            .Add({});
  auto& http_closed = prometheus::BuildCounter()
                          .Name("tensorops_http_connections_closed_total")
                          .Help(
                              "HTTP/REST connections the server closed itself, by reason: "
                              "cap_idle (idle, to make room at --http_max_connections), "
                              "cap_refused (new, at the cap with none idle), header_timeout "
                              "(--http_header_timeout), idle_timeout (--http_idle_timeout), "
                              "body_rate (--http_min_body_rate), no_descriptors (accepted and "
                              "closed while the process was out of file descriptors).")
                          .Register(registry);
  for (int r = 0; r < kNumHttpCloses; ++r) {
    m.http_closed[r] = &http_closed.Add({{"reason", kHttpCloseNames[r]}});
  }
  m.grpc_connections = &prometheus::BuildGauge()
                            .Name("tensorops_grpc_connections")
                            .Help(
                                "Open connections of the gRPC door's plaintext listeners "
                                "(--port, --listen), counted against --grpc_max_connections.")
                            .Register(registry)
                            .Add({});
  auto& refused = prometheus::BuildCounter()
                      .Name("tensorops_grpc_connections_refused_total")
                      .Help(
                          "gRPC connections closed as soon as they were accepted, by reason: "
                          "cap (--grpc_max_connections reached), emfile (the process was out "
                          "of file descriptors).")
                      .Register(registry);
  for (int r = 0; r < kNumConnectionRefusals; ++r) {
    m.grpc_connections_refused[r] = &refused.Add({{"reason", kConnectionRefusalNames[r]}});
  }
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
  BuildConnectionFamilies(*registry_, m);
  BuildCallTotals(*registry_, m);
}

namespace {

// The addresses a connection to the metrics endpoint bound on host:port
// reaches it by: host resolved, a wildcard (0.0.0.0, ::) replaced by its
// family's loopback.
std::vector<sockaddr_storage> EndpointAddresses(const std::string& host, int port) {
  std::vector<sockaddr_storage> out;
  std::string name(absl::StripSuffix(absl::StripPrefix(host, "["), "]"));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return out;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, a->ai_addr, a->ai_addrlen);
    if (ss.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
      if (v4->sin_addr.s_addr == htonl(INADDR_ANY)) v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (ss.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
      if (IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) v6->sin6_addr = in6addr_loopback;
    } else {
      continue;
    }
    out.push_back(ss);
  }
  freeaddrinfo(list);
  return out;
}

// Opens and at once closes a connection to each address, without waiting.
void Knock(const std::vector<sockaddr_storage>& addresses) {
  for (const sockaddr_storage& ss : addresses) {
    const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const socklen_t len = ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    (void)connect(fd, reinterpret_cast<const sockaddr*>(&ss), len);
    close(fd);
  }
}

}  // namespace

Metrics::~Metrics() { StopHttp(); }

void Metrics::StopHttp() {
  if (exposer_ == nullptr) return;
  // civetweb 1.15's listener thread polls its sockets in rounds of 2 s
  // (SOCKET_TIMEOUT_QUANTUM) and reads the stop flag only between rounds, so
  // ~Exposer took 1.4 s on every stop of an idle server (measured), most of a
  // stop's time, and one second of every test server's. A connection ends the
  // round at once: knock until the exposer is gone. Each knock closes at once,
  // so a knock accepted before the stop flag is set costs a worker nothing.
  const std::vector<sockaddr_storage> addresses = EndpointAddresses(http_host_, http_port_);
  absl::Notification stopped;
  std::thread knocker([&] {
    while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(5))) Knock(addresses);
  });
  exposer_.reset();
  stopped.Notify();
  knocker.join();
}

absl::StatusOr<int> Metrics::StartHttp(const std::string& host, int port) {
  const std::string address = absl::StrCat(host, ":", port);
  if (exposer_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics HTTP server already started; cannot also serve on ", address));
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    // civetweb reports bind failures (address in use, bad host) by throwing.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics HTTP server on ", address, " reports no listening port"));
  }
  exposer->RegisterCollectable(registry_);
  exposer_ = std::move(exposer);
  http_host_ = host;
  http_port_ = ports.front();
  return ports.front();
}

int Metrics::OpIndex(absl::string_view op) const {
  for (int i = 0; i < impl_->unknown_index; ++i) {
    if (impl_->op_names[i] == op) return i;
  }
  return impl_->unknown_index;
}

int Metrics::unknown_op_index() const { return impl_->unknown_index; }

const char* CallMethodName(CallMethod method) { return kMethods[MethodIndex(method)].name; }

void Metrics::RecordCall(CallMethod method, int op_index, absl::StatusCode code, double seconds,
                         int64_t bytes_in, int64_t bytes_out) {
  const int m = MethodIndex(method);
  const int op = impl_->AnyOp(op_index);
  impl_->requests[m][op][CodeIndex(code)]->Increment();
  impl_->duration[m][op]->Observe(seconds);
  impl_->call_seconds[op][code == absl::StatusCode::kOk ? 0 : 1]->Increment(seconds);
  impl_->last_call[op]->SetToCurrentTime();
  switch (kMethods[m].bytes) {
    case BytesKind::kMessageSizes:
      impl_->request_size[op]->Observe(static_cast<double>(bytes_in));
      impl_->response_size[op]->Observe(static_cast<double>(bytes_out));
      break;
    case BytesKind::kStreamBytes:
      impl_->stream_received[op]->Increment(static_cast<double>(bytes_in));
      impl_->stream_sent[op]->Increment(static_cast<double>(bytes_out));
      break;
  }
}

void Metrics::RecordListOps(absl::StatusCode code, double seconds) {
  impl_->list_ops_requests[CodeIndex(code)]->Increment();
  impl_->list_ops_duration->Observe(seconds);
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

void Metrics::SetHttpConnections(int64_t open) {
  impl_->http_connections->Set(static_cast<double>(open));
}

void Metrics::RecordHttpClosed(HttpClose reason) {
  const int r = static_cast<int>(reason);
  if (r < 0 || r >= kNumHttpCloses) return;
  impl_->http_closed[r]->Increment();
}

void Metrics::SetGrpcConnections(int64_t connections) {
  impl_->grpc_connections->Set(static_cast<double>(connections));
}

void Metrics::RecordGrpcConnectionRefused(ConnectionRefusal reason) {
  const int r = static_cast<int>(reason);
  if (r < 0 || r >= kNumConnectionRefusals) return;
  impl_->grpc_connections_refused[r]->Increment();
}

Metrics::OpTotals Metrics::ReadOpTotals(int op_index) const {
  OpTotals t;
  if (!impl_->KnownOp(op_index)) return t;
  for (int m = 0; m < kNumCallMethods; ++m) {
    for (int code = 0; code < kNumCodes; ++code) {
      const auto n = static_cast<uint64_t>(impl_->requests[m][op_index][code]->Value());
      (code == 0 ? t.success_count : t.fail_count) += n;
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
