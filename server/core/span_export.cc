#include "server/core/span_export.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/core/logging.h"

namespace tensorops {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;
namespace otlp = ::opentelemetry::proto;

// OTLP's enums, by number (opentelemetry-proto trace.proto).
constexpr int kSpanKindInternal = 1;
constexpr int kSpanKindServer = 2;
constexpr int kStatusCodeError = 2;

// The length of the valid UTF-8 sequence at the start of `s`, 0 if none
// (overlongs, surrogates and code points past U+10FFFF are not valid).
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return n;
}

void String(JsonWriter* w, absl::string_view text) {
  const std::string valid = ValidUtf8(text);
  w->String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

void Key(JsonWriter* w, const char* key) { w->Key(key); }

void UnixNanos(JsonWriter* w, const char* key, absl::Time t) {
  Key(w, key);
  String(w, absl::StrCat(absl::ToUnixNanos(t)));
}

void StringAttribute(JsonWriter* w, absl::string_view key, absl::string_view value) {
  w->StartObject();
  Key(w, "key");
  String(w, key);
  Key(w, "value");
  w->StartObject();
  Key(w, "stringValue");
  String(w, value);
  w->EndObject();
  w->EndObject();
}

void IntAttribute(JsonWriter* w, absl::string_view key, int64_t value) {
  w->StartObject();
  Key(w, "key");
  String(w, key);
  Key(w, "value");
  w->StartObject();
  Key(w, "intValue");  // int64 as a decimal string (proto3 JSON)
  String(w, absl::StrCat(value));
  w->EndObject();
  w->EndObject();
}

// One span attribute: a string or an int64 value.
struct Attribute {
  absl::string_view key;
  std::string text;
  int64_t number = 0;
  bool is_number = false;
};

Attribute Text(absl::string_view key, absl::string_view value) {
  return {key, std::string(value), 0, false};
}
Attribute Number(absl::string_view key, int64_t value) { return {key, "", value, true}; }

// The call's span's attributes, per its door's conventions; both encodings
// write this one list.
const SpanConvention& ConventionOf(const SpanRecord& span) {
  static const SpanConvention* const kNone = new SpanConvention{"call", {}, "", nullptr, nullptr};
  return span.convention != nullptr ? *span.convention : *kNone;
}

std::vector<Attribute> CallAttributes(const SpanRecord& span) {
  const SpanConvention& convention = ConventionOf(span);
  std::vector<Attribute> out;
  out.reserve(convention.attributes.size() + 4);
  for (const auto& [key, value] : convention.attributes) out.push_back(Text(key, value));
  if (!convention.code_attribute.empty()) {
    out.push_back(Number(convention.code_attribute, convention.code_value
                                                        ? convention.code_value(span.code)
                                                        : static_cast<int>(span.code)));
  }
  out.push_back(Text("tensorops.op", span.op));
  out.push_back(Number("tensorops.bytes_in", span.bytes_in));
  out.push_back(Number("tensorops.bytes_out", span.bytes_out));
  return out;
}

void WriteAttributes(JsonWriter* w, const std::vector<Attribute>& attributes) {
  w->StartArray();
  for (const Attribute& a : attributes) {
    if (a.is_number) {
      IntAttribute(w, a.key, a.number);
    } else {
      StringAttribute(w, a.key, a.text);
    }
  }
  w->EndArray();
}

bool IsError(const SpanRecord& span) {
  const SpanConvention& convention = ConventionOf(span);
  return convention.failed && convention.failed(span.code);
}

// One span object. `parent` empty: a root span. `call` non-null: the
// call's own span (attributes and status), else a stage.
void WriteSpan(JsonWriter* w, absl::string_view trace_id, absl::string_view span_id,
               absl::string_view parent, absl::string_view tracestate, absl::string_view name,
               int kind, absl::Time start, absl::Time end, const SpanRecord* call) {
  w->StartObject();
  Key(w, "traceId");
  String(w, trace_id);
  Key(w, "spanId");
  String(w, span_id);
  if (!parent.empty()) {
    Key(w, "parentSpanId");
    String(w, parent);
  }
  if (!tracestate.empty()) {
    Key(w, "traceState");
    String(w, tracestate);
  }
  Key(w, "name");
  String(w, name);
  Key(w, "kind");
  w->Int(kind);
  UnixNanos(w, "startTimeUnixNano", start);
  UnixNanos(w, "endTimeUnixNano", end);
  if (call != nullptr) {
    Key(w, "attributes");
    WriteAttributes(w, CallAttributes(*call));
    if (IsError(*call)) {
      Key(w, "status");
      w->StartObject();
      Key(w, "code");
      w->Int(kStatusCodeError);
      Key(w, "message");
      String(w, call->message);
      w->EndObject();
    }
  }
  w->EndObject();
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

void WriteResource(JsonWriter* w, const SpanResource& resource) {
  Key(w, "resource");
  w->StartObject();
  Key(w, "attributes");
  w->StartArray();
  StringAttribute(w, "service.name", resource.service_name);
  if (!resource.instance_id.empty()) {
    StringAttribute(w, "service.instance.id", resource.instance_id);
  }
  w->EndArray();
  w->EndObject();
}

// A call's span and its stages' child spans.
void WriteCall(JsonWriter* w, const SpanRecord& span) {
  const absl::string_view trace_id(span.trace_id.data(), span.trace_id.size());
  const absl::string_view span_id(span.span_id.data(), span.span_id.size());
  const absl::string_view parent =
      span.has_parent ? absl::string_view(span.parent_span_id.data(), span.parent_span_id.size())
                      : absl::string_view();
  WriteSpan(w, trace_id, span_id, parent, span.tracestate, ConventionOf(span).name, kSpanKindServer,
            span.start, span.end, &span);
  if (span.queue_start.has_value() && span.kernel_start.has_value()) {
    WriteSpan(w, trace_id, HexId(NewSpanId()), span_id, "", "queue", kSpanKindInternal,
              *span.queue_start, *span.kernel_start, nullptr);
  }
  if (span.kernel_start.has_value() && span.kernel_end.has_value()) {
    WriteSpan(w, trace_id, HexId(NewSpanId()), span_id, "", "kernel", kSpanKindInternal,
              *span.kernel_start, *span.kernel_end, nullptr);
  }
}

// The bytes of a lowercase hex id (OTLP's protobuf ids are bytes).
std::string IdBytes(absl::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(value(hex[2 * i]) * 16 + value(hex[2 * i + 1]));
  }
  return out;
}

void SetAttribute(otlp::common::v1::KeyValue* kv, const Attribute& a) {
  kv->set_key(std::string(a.key));
  if (a.is_number) {
    kv->mutable_value()->set_int_value(a.number);
  } else {
    kv->mutable_value()->set_string_value(ValidUtf8(a.text));
  }
}

uint64_t UnixNanosOf(absl::Time t) { return static_cast<uint64_t>(absl::ToUnixNanos(t)); }

otlp::trace::v1::Span* AddSpan(otlp::trace::v1::ScopeSpans* scope, absl::string_view trace_id,
                               absl::string_view span_id, absl::string_view parent,
                               absl::string_view name, otlp::trace::v1::Span::SpanKind kind,
                               absl::Time start, absl::Time end) {
  otlp::trace::v1::Span* span = scope->add_spans();
  span->set_trace_id(IdBytes(trace_id));
  span->set_span_id(IdBytes(span_id));
  if (!parent.empty()) span->set_parent_span_id(IdBytes(parent));
  span->set_name(ValidUtf8(name));
  span->set_kind(kind);
  span->set_start_time_unix_nano(UnixNanosOf(start));
  span->set_end_time_unix_nano(UnixNanosOf(end));
  return span;
}

// A call's span and its stages' child spans, as WriteCall writes them.
void AddCall(otlp::trace::v1::ScopeSpans* scope, const SpanRecord& record) {
  using otlp::trace::v1::Span;
  const absl::string_view trace_id(record.trace_id.data(), record.trace_id.size());
  const absl::string_view span_id(record.span_id.data(), record.span_id.size());
  const absl::string_view parent =
      record.has_parent
          ? absl::string_view(record.parent_span_id.data(), record.parent_span_id.size())
          : absl::string_view();
  Span* span = AddSpan(scope, trace_id, span_id, parent, ConventionOf(record).name,
                       Span::SPAN_KIND_SERVER, record.start, record.end);
  if (!record.tracestate.empty()) span->set_trace_state(record.tracestate);
  for (const Attribute& a : CallAttributes(record)) {
    SetAttribute(span->add_attributes(), a);
  }
  if (IsError(record)) {
    span->mutable_status()->set_code(otlp::trace::v1::Status::STATUS_CODE_ERROR);
    span->mutable_status()->set_message(ValidUtf8(record.message));
  }
  if (record.queue_start.has_value() && record.kernel_start.has_value()) {
    AddSpan(scope, trace_id, HexId(NewSpanId()), span_id, "queue", Span::SPAN_KIND_INTERNAL,
            *record.queue_start, *record.kernel_start);
  }
  if (record.kernel_start.has_value() && record.kernel_end.has_value()) {
    AddSpan(scope, trace_id, HexId(NewSpanId()), span_id, "kernel", Span::SPAN_KIND_INTERNAL,
            *record.kernel_start, *record.kernel_end);
  }
}

}  // namespace

std::string EncodeOtlpProtobuf(absl::Span<const SpanRecord> spans, const SpanResource& resource) {
  otlp::collector::trace::v1::ExportTraceServiceRequest request;
  otlp::trace::v1::ResourceSpans* rs = request.add_resource_spans();
  SetAttribute(rs->mutable_resource()->add_attributes(),
               Text("service.name", resource.service_name));
  if (!resource.instance_id.empty()) {
    SetAttribute(rs->mutable_resource()->add_attributes(),
                 Text("service.instance.id", resource.instance_id));
  }
  otlp::trace::v1::ScopeSpans* scope = rs->add_scope_spans();
  scope->mutable_scope()->set_name("tensorops");
  for (const SpanRecord& span : spans) AddCall(scope, span);
  return request.SerializeAsString();
}

std::string ValidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      text.remove_prefix(1);
    } else {
      out.append(text.data(), n);
      text.remove_prefix(n);
    }
  }
  return out;
}

std::string NewInstanceId() {
  // 122 random bits, the version (4) and variant (10) bits set (RFC 4122).
  uint64_t hi = NewSpanId();
  uint64_t lo = NewSpanId();
  hi = (hi & ~uint64_t{0xf000}) | 0x4000;
  lo = (lo & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  const std::string h = HexId(hi);
  const std::string l = HexId(lo);
  return absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                      l.substr(0, 4), "-", l.substr(4));
}

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

std::string EncodeOtlpJson(absl::Span<const SpanRecord> spans, const SpanResource& resource) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Key(&w, "resourceSpans");
  w.StartArray();
  w.StartObject();
  WriteResource(&w, resource);
  Key(&w, "scopeSpans");
  w.StartArray();
  w.StartObject();
  Key(&w, "scope");
  w.StartObject();
  Key(&w, "name");
  w.String("tensorops");
  w.EndObject();
  Key(&w, "spans");
  w.StartArray();
  for (const SpanRecord& span : spans) WriteCall(&w, span);
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

SpanExporter::SpanExporter(Options options, PostFn post, Metrics* metrics)
    : options_(std::move(options)), post_(std::move(post)), metrics_(metrics) {
  thread_ = std::thread([this] { Loop(); });
}

SpanExporter::~SpanExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SpanExporter::Export(SpanRecord span) {
  bool full_batch = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_queue) {
      if (metrics_ != nullptr) metrics_->RecordSpansDropped(Metrics::SpanDrop::kQueueFull, 1);
      return;
    }
    queue_.push_back(std::move(span));
    full_batch = queue_.size() == options_.max_batch;
  }
  if (full_batch) wake_.notify_one();
}

void SpanExporter::Loop() {
  std::vector<SpanRecord> taken;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Wake for a full batch or the stop; else send what there is each
      // interval.
      wake_.wait_for(lock, absl::ToChronoNanoseconds(options_.interval),
                     [this] { return stopping_ || queue_.size() >= options_.max_batch; });
      stopping = stopping_;
      // The whole queue at once, for an empty vector (with last round's
      // capacity): the calls' lock is held for a swap, never a copy.
      taken.swap(queue_);
    }
    const absl::Span<const SpanRecord> all(taken);
    for (size_t at = 0; at < all.size(); at += options_.max_batch) {
      if (stopping && at > 0) {
        // One last batch was sent (a gone collector must not hold up the
        // exit for a POST timeout per batch): the rest is dropped.
        if (metrics_ != nullptr) {
          metrics_->RecordSpansDropped(Metrics::SpanDrop::kExportFailed,
                                       static_cast<int64_t>(all.size() - at));
        }
        break;
      }
      Send(all.subspan(at, options_.max_batch));
    }
    taken.clear();
    if (stopping) return;
  }
}

void SpanExporter::Send(absl::Span<const SpanRecord> spans) {
  const int64_t n = static_cast<int64_t>(spans.size());
  const absl::Status s =
      post_(options_.encoding == Encoding::kProtobuf ? EncodeOtlpProtobuf(spans, options_.resource)
                                                     : EncodeOtlpJson(spans, options_.resource),
            options_.timeout);
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
