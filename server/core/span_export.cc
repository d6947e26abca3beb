#include "server/core/span_export.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/logging.h"

namespace tensorops {
namespace {

// OTLP's enums, by number (opentelemetry-proto trace.proto).
constexpr int kSpanKindInternal = 1;
constexpr int kSpanKindServer = 2;
constexpr int kStatusCodeError = 2;

// A JSON string of `text`: quotes, backslashes and control characters
// escaped; bytes >= 0x80 as '?' (an op name or message may quote what a
// client sent, which need not be UTF-8).
void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    } else if (c >= 0x80) {
      out->push_back('?');
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

std::string UnixNanos(absl::Time t) { return absl::StrCat("\"", absl::ToUnixNanos(t), "\""); }

void AppendStringAttribute(absl::string_view key, absl::string_view value, std::string* out) {
  absl::StrAppend(out, "{\"key\":\"", key, "\",\"value\":{\"stringValue\":");
  AppendJsonString(value, out);
  out->append("}}");
}

void AppendIntAttribute(absl::string_view key, int64_t value, std::string* out) {
  absl::StrAppend(out, "{\"key\":\"", key, "\",\"value\":{\"intValue\":\"", value, "\"}}");
}

// One span object. `parent` empty: a root span.
void AppendSpan(absl::string_view trace_id, absl::string_view span_id, absl::string_view parent,
                absl::string_view tracestate, absl::string_view name, int kind, absl::Time start,
                absl::Time end, const std::string& attributes, const SpanRecord* status_of,
                std::string* out) {
  absl::StrAppend(out, "{\"traceId\":\"", trace_id, "\",\"spanId\":\"", span_id, "\"");
  if (!parent.empty()) absl::StrAppend(out, ",\"parentSpanId\":\"", parent, "\"");
  if (!tracestate.empty()) {
    out->append(",\"traceState\":");
    AppendJsonString(tracestate, out);
  }
  out->append(",\"name\":");
  AppendJsonString(name, out);
  absl::StrAppend(out, ",\"kind\":", kind, ",\"startTimeUnixNano\":", UnixNanos(start),
                  ",\"endTimeUnixNano\":", UnixNanos(end), ",\"attributes\":[", attributes, "]");
  if (status_of != nullptr && status_of->code != absl::StatusCode::kOk) {
    absl::StrAppend(out, ",\"status\":{\"code\":", kStatusCodeError, ",\"message\":");
    AppendJsonString(status_of->message, out);
    out->append("}");
  }
  out->append("}");
}

std::string HexId(uint64_t id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[id & 15];
    id >>= 4;
  }
  return out;
}

}  // namespace

void SpanRecord::SetTrace(const TraceContext& trace) {
  const absl::string_view t = trace.trace_id_hex();
  const absl::string_view s = trace.span_id_hex();
  const absl::string_view p = trace.parent_span_id_hex();
  std::copy(t.begin(), t.end(), trace_id.begin());
  std::copy(s.begin(), s.end(), span_id.begin());
  has_parent = !p.empty();
  if (has_parent) std::copy(p.begin(), p.end(), parent_span_id.begin());
  tracestate = trace.tracestate();
}

std::string EncodeOtlpJson(absl::Span<const SpanRecord> spans, absl::string_view service_name) {
  std::string out = "{\"resourceSpans\":[{\"resource\":{\"attributes\":[";
  AppendStringAttribute("service.name", service_name, &out);
  out.append("]},\"scopeSpans\":[{\"scope\":{\"name\":\"tensorops\"},\"spans\":[");
  bool first = true;
  auto separator = [&] {
    if (!first) out.push_back(',');
    first = false;
  };
  for (const SpanRecord& span : spans) {
    const absl::string_view trace_id(span.trace_id.data(), span.trace_id.size());
    const absl::string_view span_id(span.span_id.data(), span.span_id.size());
    const absl::string_view parent =
        span.has_parent ? absl::string_view(span.parent_span_id.data(), span.parent_span_id.size())
                        : absl::string_view();
    std::string attributes;
    AppendStringAttribute("rpc.method", span.method, &attributes);
    attributes.push_back(',');
    AppendStringAttribute("tensorops.op", span.op, &attributes);
    attributes.push_back(',');
    AppendStringAttribute("tensorops.code", StatusCodeName(span.code), &attributes);
    if (!span.code_attribute.empty()) {
      attributes.push_back(',');
      AppendIntAttribute(span.code_attribute, static_cast<int>(span.code), &attributes);
    }
    attributes.push_back(',');
    AppendIntAttribute("tensorops.bytes_in", span.bytes_in, &attributes);
    attributes.push_back(',');
    AppendIntAttribute("tensorops.bytes_out", span.bytes_out, &attributes);
    separator();
    AppendSpan(trace_id, span_id, parent, span.tracestate, span.method, kSpanKindServer, span.start,
               span.end, attributes, &span, &out);
    // The stages, as children of the call's span.
    if (span.queue_start.has_value() && span.kernel_start.has_value()) {
      separator();
      AppendSpan(trace_id, HexId(NewSpanId()), span_id, "", "queue", kSpanKindInternal,
                 *span.queue_start, *span.kernel_start, "", nullptr, &out);
    }
    if (span.kernel_start.has_value() && span.kernel_end.has_value()) {
      separator();
      AppendSpan(trace_id, HexId(NewSpanId()), span_id, "", "kernel", kSpanKindInternal,
                 *span.kernel_start, *span.kernel_end, "", nullptr, &out);
    }
  }
  out.append("]}]}]}");
  return out;
}

SpanExporter::SpanExporter(Options options, PostFn post, Metrics* metrics)
    : options_(std::move(options)), post_(std::move(post)), metrics_(metrics) {
  queue_.reserve(options_.max_batch);
  thread_ = std::thread([this] { Loop(); });
}

SpanExporter::~SpanExporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SpanExporter::Export(SpanRecord span) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queue) {
    if (metrics_ != nullptr) metrics_->RecordSpansDropped(Metrics::SpanDrop::kQueueFull, 1);
    return;
  }
  queue_.push_back(std::move(span));
}

void SpanExporter::Loop() {
  std::vector<SpanRecord> batch;
  for (;;) {
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      // Wake for a full batch or the stop; else send what there is each
      // interval.
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() >= options_.max_batch;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.interval);
      stopping = stopping_;
      const size_t n = std::min(queue_.size(), options_.max_batch);
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    }
    if (!batch.empty()) Send(&batch);
    if (stopping) {
      // One last batch was sent (a gone collector must not hold up the
      // exit for a POST timeout per batch): the rest is dropped.
      absl::MutexLock lock(&mu_);
      if (!queue_.empty() && metrics_ != nullptr) {
        metrics_->RecordSpansDropped(Metrics::SpanDrop::kExportFailed,
                                     static_cast<int64_t>(queue_.size()));
      }
      queue_.clear();
      return;
    }
  }
}

void SpanExporter::Send(std::vector<SpanRecord>* batch) {
  const int64_t n = static_cast<int64_t>(batch->size());
  const absl::Status s = post_(EncodeOtlpJson(*batch, options_.service_name), options_.timeout);
  batch->clear();
  if (s.ok()) {
    if (metrics_ != nullptr) metrics_->RecordSpansExported(n);
    return;
  }
  if (metrics_ != nullptr) metrics_->RecordSpansDropped(Metrics::SpanDrop::kExportFailed, n);
  // The collector's trouble, at most once a minute (the metric counts it all).
  const absl::Time now = absl::Now();
  if (now - last_warning_ >= absl::Minutes(1)) {
    last_warning_ = now;
    Log(LogLevel::kWarning, absl::StrCat("span export to the OTLP collector failed (", n,
                                         " spans dropped): ", s.ToString()));
  }
}

}  // namespace tensorops
