// Spans out, where a collector exists: one span per call (its stages as
// child spans), encoded as OTLP/HTTP JSON (opentelemetry-proto's
// ExportTraceServiceRequest in proto3 JSON, as POST /v1/traces takes it)
// and sent in batches by a thread of its own, never on the call's path.
//
// The call path only hands a SpanRecord (fixed-size ids, a few numbers,
// the op name) to SpanExporter::Export, which takes a mutex for a
// push_back. When the collector is slow or gone the queue fills and further
// spans are dropped, as are batches whose POST fails or times out; both
// are counted (tensorops_spans_dropped_total{reason}). Off unless
// --otlp_endpoint is set.
//
// The HTTP client is the door's business (server/http/otlp_client.h, on
// Boost.Beast): the exporter takes it as a PostFn, so this room links
// neither Boost nor gRPC and tests post wherever they like.
//
// Thread-safety: Export may be called from any thread; the exporter's
// thread does the rest. Destroying the exporter sends one last batch of
// what is queued (one POST, bounded by Options::timeout), drops the rest
// and joins the thread.
#ifndef TENSOROPS_SERVER_CORE_SPAN_EXPORT_H_
#define TENSOROPS_SERVER_CORE_SPAN_EXPORT_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/core/metrics.h"
#include "server/core/trace.h"

namespace tensorops {

// One finished call, as the exporter needs it.
struct SpanRecord {
  std::array<char, 32> trace_id{};  // lowercase hex
  std::array<char, 16> span_id{};
  std::array<char, 16> parent_span_id{};
  bool has_parent = false;
  std::string tracestate;  // the caller's, usually empty
  // The call's method (CallMethodSpec::name) and the attribute its status
  // code goes under (span_code_attribute; empty: none): views of the
  // registered method, which outlives the exporter.
  absl::string_view method;
  absl::string_view code_attribute;
  std::string op;  // as the call named it (cut to 64 bytes)
  absl::Time start;
  absl::Time end;
  // The stages a call reached (Server-Timing's queue and kernel).
  std::optional<absl::Time> queue_start;
  std::optional<absl::Time> kernel_start;
  std::optional<absl::Time> kernel_end;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;  // the error's, "" when OK
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;

  // The ids and the caller's tracestate of `trace`.
  void SetTrace(const TraceContext& trace);
};

// An OTLP/HTTP JSON body (ExportTraceServiceRequest) of `spans`: one
// resource (service.name = `service_name`), one scope ("tensorops"), per
// call a SERVER span named after its method (as its door registered it) with
// its op, code and byte counts as attributes, status ERROR and the message
// on failure, and INTERNAL child spans "queue" and "kernel" where reached
// (their span ids made here). Ids in hex and int64s as decimal strings, as
// OTLP's JSON mapping says; strings escaped, non-ASCII bytes as '?'.
std::string EncodeOtlpJson(absl::Span<const SpanRecord> spans, absl::string_view service_name);

class SpanExporter {
 public:
  // Sends one body (a POST to the collector); OK when it took it. Must give
  // up after `timeout`.
  using PostFn = std::function<absl::Status(const std::string& body, absl::Duration timeout)>;

  struct Options {
    std::string service_name = "tensorops-server";
    // Spans waiting for the exporter's thread; past it, new spans are
    // dropped (reason "queue_full").
    size_t max_queue = 4096;
    // Spans per POST; a full batch is sent at once, a partial one after
    // `interval`.
    size_t max_batch = 512;
    absl::Duration interval = absl::Seconds(1);
    // One POST's limit; a slower or failed one drops its batch (reason
    // "export_failed").
    absl::Duration timeout = absl::Seconds(2);
  };

  // `metrics` (not owned, may be null) counts exported and dropped spans and
  // must outlive the exporter.
  SpanExporter(Options options, PostFn post, Metrics* metrics);
  ~SpanExporter();
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues a span for the next batch, or drops it when the queue is full.
  // Never blocks on the network.
  void Export(SpanRecord span);

 private:
  void Loop();
  // Sends `batch` (on the exporter's thread) and counts the outcome.
  void Send(std::vector<SpanRecord>* batch);

  const Options options_;
  const PostFn post_;
  Metrics* const metrics_;
  absl::Mutex mu_;
  std::vector<SpanRecord> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_warning_ = absl::InfinitePast();  // the exporter's thread only
  std::thread thread_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_SPAN_EXPORT_H_
