// Spans out, where a collector exists: one span per call (its stages as
// child spans), encoded as OTLP/HTTP protobuf or JSON (opentelemetry-proto's
// ExportTraceServiceRequest, as POST /v1/traces takes it) and sent in batches by a thread of its
// own, never on the call's path.
//
// The call path only hands a SpanRecord (fixed-size ids, a few numbers,
// the op name) to SpanExporter::Export, which takes a mutex for a
// push_back; the exporter's thread takes the whole queue at once (a swap
// under the lock) and encodes and sends it outside the lock. When the collector is slow or gone the
// queue fills and further spans are dropped, as are batches whose POST fails or times out; both are
// counted (tensorops_spans_dropped_total{reason}). Off unless
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
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
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
  // How the call's door names and describes its span (CallMethodSpec::span
  // of the registered method, which outlives the exporter); null: a span
  // named "call" with no door attributes.
  const SpanConvention* convention = nullptr;
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

// Who sends the spans: OpenTelemetry's resource attributes.
struct SpanResource {
  std::string service_name = "tensorops-server";  // service.name
  std::string instance_id;  // service.instance.id, one per replica (NewInstanceId)
};

// A random UUID (version 4), a replica's service.instance.id.
std::string NewInstanceId();

// An OTLP/HTTP JSON body (ExportTraceServiceRequest in proto3 JSON, as
// POST /v1/traces takes it) of `spans`: one resource (`resource`), one
// scope ("tensorops"), per call a SERVER span named and attributed as its
// door's SpanConvention says (OpenTelemetry's semantic conventions for the
// door's protocol, docs/server.md "Tracing"), with tensorops.op and the
// byte counts; status ERROR (with the message) where the convention calls
// the server span failed. INTERNAL child spans "queue" and "kernel" where reached (their span
// ids made here). Ids in hex and int64s as decimal strings, as OTLP's JSON
// mapping says; text that is not valid UTF-8 has its bad bytes replaced by
// U+FFFD (valid UTF-8 is kept as it is).
std::string EncodeOtlpJson(absl::Span<const SpanRecord> spans, const SpanResource& resource);

// The same request as OTLP/HTTP protobuf (http/protobuf, the collector's
// default): opentelemetry-proto's ExportTraceServiceRequest
// (proto/opentelemetry), ids as bytes, times as fixed64 nanoseconds.
std::string EncodeOtlpProtobuf(absl::Span<const SpanRecord> spans, const SpanResource& resource);

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string ValidUtf8(absl::string_view text);

class SpanExporter {
 public:
  // Sends one body (a POST to the collector); OK when it took it. Must give
  // up after `timeout`.
  using PostFn = std::function<absl::Status(const std::string& body, absl::Duration timeout)>;
  // The body's encoding (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
  // OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf or http/json).
  enum class Encoding { kProtobuf, kJson };

  struct Options {
    SpanResource resource;
    Encoding encoding = Encoding::kProtobuf;
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
  // Sends `spans` (on the exporter's thread) and counts the outcome.
  void Send(absl::Span<const SpanRecord> spans);

  const Options options_;
  const PostFn post_;
  Metrics* const metrics_;
  // std::mutex, not absl::Mutex: ThreadSanitizer cannot see Debian's
  // uninstrumented Abseil, and every call's Export meets the export thread.
  std::mutex mu_;
  std::condition_variable wake_;  // a full batch, or stopping_
  std::vector<SpanRecord> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_warning_ = absl::InfinitePast();  // the exporter's thread only
  std::thread thread_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_SPAN_EXPORT_H_
