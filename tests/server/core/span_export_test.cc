#include "server/core/span_export.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "prometheus/registry.h"
#include "rapidjson/document.h"
#include "server/grpc/grpc_metrics.h"
#include "server/http/infer_call.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

// The doors' own span conventions, as they register them at start
// (grpc/grpc_metrics.cc, http/infer_call.cc): core/ writes what they say.
struct Doors {
  Metrics metrics{std::vector<std::string>{"Roll"}};
  GrpcMethods grpc = GrpcMethods::Register(&metrics);
  const CallMethod* rest = RegisterInferMethod(&metrics);
};
const Doors& TheDoors() {
  static const Doors* const doors = new Doors;
  return *doors;
}

SpanRecord Span(absl::string_view op, bool with_stages) {
  SpanRecord s;
  TraceFields fields;
  fields.traceparent.push_back("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  fields.tracestate.push_back("congo=t61rcWkgMzE");
  s.SetTrace(TraceContext::Start(fields));
  s.convention = &TheDoors().grpc.execute->spec().span;
  s.op = std::string(op);
  s.start = absl::FromUnixNanos(1700000000000000000);
  s.end = s.start + absl::Microseconds(300);
  if (with_stages) {
    s.queue_start = s.start + absl::Microseconds(10);
    s.kernel_start = s.start + absl::Microseconds(20);
    s.kernel_end = s.start + absl::Microseconds(250);
  }
  s.bytes_in = 120;
  s.bytes_out = 64;
  return s;
}

const rapidjson::Value& Attribute(const rapidjson::Value& span, const char* key) {
  for (const auto& a : span["attributes"].GetArray()) {
    if (std::string(a["key"].GetString()) == key) return a["value"];
  }
  static const rapidjson::Value kNone;
  return kNone;
}

TEST(SpanExportTest, OtlpJsonSchema) {
  SpanRecord failed = Span("Ro\"ll\n\xff", false);
  failed.code = absl::StatusCode::kInvalidArgument;
  failed.message = "axes[0] = 9 is out of range";
  SpanRecord internal = Span("Roll", false);
  internal.code = absl::StatusCode::kInternal;
  internal.message = "caf\xc3\xa9 \xe2\x82\xac bad:\xc3(";
  SpanResource resource;
  resource.instance_id = NewInstanceId();
  const std::string json = EncodeOtlpJson({Span("Roll", true), failed, internal}, resource);
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError()) << json;
  const auto& rs = doc["resourceSpans"][0];
  const auto& resource_attr = rs["resource"]["attributes"][0];
  EXPECT_STREQ(resource_attr["key"].GetString(), "service.name");
  EXPECT_STREQ(resource_attr["value"]["stringValue"].GetString(), "tensorops-server");
  EXPECT_STREQ(rs["resource"]["attributes"][1]["key"].GetString(), "service.instance.id");
  EXPECT_EQ(rs["resource"]["attributes"][1]["value"]["stringValue"].GetString(),
            resource.instance_id);
  const auto& spans = rs["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.Size(), 5u);  // the call, queue, kernel; the failed calls
  const auto& call = spans[0];
  EXPECT_STREQ(call["traceId"].GetString(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_STREQ(call["parentSpanId"].GetString(), "00f067aa0ba902b7");
  EXPECT_EQ(std::string(call["spanId"].GetString()).size(), 16u);
  EXPECT_STREQ(call["traceState"].GetString(), "congo=t61rcWkgMzE");
  EXPECT_STREQ(call["name"].GetString(), "tensorops.v1.TensorOps/Execute");
  EXPECT_STREQ(Attribute(call, "rpc.system")["stringValue"].GetString(), "grpc");
  EXPECT_STREQ(Attribute(call, "rpc.service")["stringValue"].GetString(), "tensorops.v1.TensorOps");
  EXPECT_STREQ(Attribute(call, "rpc.method")["stringValue"].GetString(), "Execute");
  EXPECT_STREQ(Attribute(call, "rpc.grpc.status_code")["intValue"].GetString(), "0");
  EXPECT_EQ(call["kind"].GetInt(), 2);
  EXPECT_STREQ(call["startTimeUnixNano"].GetString(), "1700000000000000000");
  EXPECT_STREQ(call["endTimeUnixNano"].GetString(), "1700000000000300000");
  EXPECT_STREQ(Attribute(call, "tensorops.op")["stringValue"].GetString(), "Roll");
  EXPECT_STREQ(Attribute(call, "tensorops.bytes_in")["intValue"].GetString(), "120");
  EXPECT_FALSE(call.HasMember("status"));
  for (int i : {1, 2}) {
    SCOPED_TRACE(i);
    const auto& stage = spans[i];
    EXPECT_STREQ(stage["name"].GetString(), i == 1 ? "queue" : "kernel");
    EXPECT_STREQ(stage["parentSpanId"].GetString(), call["spanId"].GetString());
    EXPECT_STREQ(stage["traceId"].GetString(), call["traceId"].GetString());
    EXPECT_EQ(stage["kind"].GetInt(), 1);
  }
  EXPECT_STREQ(spans[2]["startTimeUnixNano"].GetString(), "1700000000000020000");
  EXPECT_STREQ(spans[2]["endTimeUnixNano"].GetString(), "1700000000000250000");
  // The caller's mistake is not the server span's error (the conventions).
  const auto& bad = spans[3];
  EXPECT_FALSE(bad.HasMember("status"));
  EXPECT_STREQ(Attribute(bad, "rpc.grpc.status_code")["intValue"].GetString(), "3");
  // Escaped, and a byte that is not UTF-8 replaced by U+FFFD.
  EXPECT_STREQ(Attribute(bad, "tensorops.op")["stringValue"].GetString(), "Ro\"ll\n\xef\xbf\xbd");
  // The server's failure is; valid UTF-8 is kept.
  const auto& internal_span = spans[4];
  EXPECT_EQ(internal_span["status"]["code"].GetInt(), 2);
  EXPECT_STREQ(internal_span["status"]["message"].GetString(),
               "caf\xc3\xa9 \xe2\x82\xac bad:\xef\xbf\xbd(");
}

TEST(SpanExportTest, RestSpansFollowTheHttpConventions) {
  SpanRecord ok = Span("Roll", false);
  ok.convention = &TheDoors().rest->spec().span;
  SpanRecord unavailable = ok;
  unavailable.code = absl::StatusCode::kUnavailable;
  unavailable.message = "draining";
  SpanRecord bad = ok;
  bad.code = absl::StatusCode::kInvalidArgument;
  SpanResource resource;
  const std::string json = EncodeOtlpJson({ok, unavailable, bad}, resource);
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError()) << json;
  const auto& spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.Size(), 3u);
  EXPECT_STREQ(spans[0]["name"].GetString(), "POST /v2/models/{model}/infer");
  EXPECT_STREQ(Attribute(spans[0], "http.request.method")["stringValue"].GetString(), "POST");
  EXPECT_STREQ(Attribute(spans[0], "http.route")["stringValue"].GetString(),
               "/v2/models/{model}/infer");
  EXPECT_STREQ(Attribute(spans[0], "http.response.status_code")["intValue"].GetString(), "200");
  EXPECT_FALSE(Attribute(spans[0], "rpc.system").IsObject());
  EXPECT_FALSE(spans[0].HasMember("status"));
  EXPECT_EQ(spans[1]["status"]["code"].GetInt(), 2);  // 5xx: the server's failure
  EXPECT_STREQ(Attribute(spans[2], "http.response.status_code")["intValue"].GetString(), "400");
  EXPECT_FALSE(spans[2].HasMember("status"));  // 4xx: the caller's
}

TEST(SpanExportTest, OtlpProtobufCarriesTheSameSpans) {
  SpanRecord failed = Span("Ro\xff", false);
  failed.code = absl::StatusCode::kUnavailable;
  failed.message = "draining";
  SpanResource resource;
  resource.instance_id = NewInstanceId();
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  ASSERT_TRUE(request.ParseFromString(EncodeOtlpProtobuf({Span("Roll", true), failed}, resource)));
  ASSERT_EQ(request.resource_spans_size(), 1);
  const auto& rs = request.resource_spans(0);
  ASSERT_EQ(rs.resource().attributes_size(), 2);
  EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "tensorops-server");
  EXPECT_EQ(rs.resource().attributes(1).value().string_value(), resource.instance_id);
  ASSERT_EQ(rs.scope_spans_size(), 1);
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "tensorops");
  const auto& spans = rs.scope_spans(0).spans();
  ASSERT_EQ(spans.size(), 4);
  const auto& call = spans[0];
  EXPECT_EQ(call.trace_id(),
            std::string("\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36", 16));
  EXPECT_EQ(call.parent_span_id(), std::string("\x00\xf0\x67\xaa\x0b\xa9\x02\xb7", 8));
  EXPECT_EQ(call.span_id().size(), 8u);
  EXPECT_EQ(call.trace_state(), "congo=t61rcWkgMzE");
  EXPECT_EQ(call.name(), "tensorops.v1.TensorOps/Execute");
  EXPECT_EQ(call.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(call.start_time_unix_nano(), 1700000000000000000u);
  EXPECT_EQ(call.end_time_unix_nano(), 1700000000000300000u);
  EXPECT_EQ(call.attributes(0).key(), "rpc.system");
  EXPECT_EQ(call.attributes(3).key(), "rpc.grpc.status_code");
  EXPECT_EQ(call.attributes(3).value().int_value(), 0);
  EXPECT_FALSE(call.has_status());
  for (int i : {1, 2}) {
    EXPECT_EQ(spans[i].name(), i == 1 ? "queue" : "kernel");
    EXPECT_EQ(spans[i].parent_span_id(), call.span_id());
    EXPECT_EQ(spans[i].kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_INTERNAL);
  }
  const auto& bad = spans[3];
  EXPECT_EQ(bad.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(bad.status().message(), "draining");
  EXPECT_EQ(bad.attributes(4).key(), "tensorops.op");
  EXPECT_EQ(bad.attributes(4).value().string_value(), "Ro\xef\xbf\xbd");
}

TEST(SpanExportTest, InstanceIdsAreRandomUuids) {
  const std::string a = NewInstanceId();
  const std::string b = NewInstanceId();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');  // version 4
  EXPECT_TRUE(a[19] == '8' || a[19] == '9' || a[19] == 'a' || a[19] == 'b') << a;
  EXPECT_EQ(a[8], '-');
  EXPECT_EQ(a[23], '-');
}

TEST(SpanExportTest, BatchesAreSentOffTheCallersThread) {
  absl::Mutex mu;
  std::vector<std::string> bodies;
  SpanExporter::Options options;
  options.encoding = SpanExporter::Encoding::kJson;
  options.max_batch = 3;
  options.interval = absl::Milliseconds(50);
  Metrics metrics({"Roll"});
  {
    SpanExporter exporter(
        options,
        [&](const std::string& body, absl::Duration) {
          absl::MutexLock lock(&mu);
          bodies.push_back(body);
          return absl::OkStatus();
        },
        &metrics);
    for (int i = 0; i < 7; ++i) exporter.Export(Span("Roll", false));
    absl::SleepFor(absl::Milliseconds(300));
  }
  absl::MutexLock lock(&mu);
  ASSERT_GE(bodies.size(), 3u);  // 3 + 3 + 1
  int spans = 0;
  for (const std::string& body : bodies) {
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(body.c_str()).HasParseError());
    const int n = static_cast<int>(doc["resourceSpans"][0]["scopeSpans"][0]["spans"].Size());
    EXPECT_LE(n, 3);
    spans += n;
  }
  EXPECT_EQ(spans, 7);
}

TEST(SpanExportTest, SlowOrGoneCollectorDropsAndCounts) {
  SpanExporter::Options options;
  options.max_queue = 4;
  options.max_batch = 2;
  options.interval = absl::Milliseconds(10);
  Metrics metrics({"Roll"});
  absl::Notification release;
  std::atomic<int> posts{0};
  {
    SpanExporter exporter(
        options,
        [&](const std::string&, absl::Duration) {
          // The first POST hangs until released (a slow collector); then
          // every POST fails (a gone one).
          if (posts.fetch_add(1) == 0) release.WaitForNotification();
          return absl::UnavailableError("connection refused");
        },
        &metrics);
    exporter.Export(Span("Roll", false));
    exporter.Export(Span("Roll", false));
    while (posts.load() == 0) absl::SleepFor(absl::Milliseconds(1));
    // The exporter's thread is stuck in its POST: Export never waits.
    const absl::Time start = absl::Now();
    for (int i = 0; i < 10; ++i) exporter.Export(Span("Roll", false));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
    release.Notify();
  }
  auto text = [&] {
    std::string out;
    for (const auto& family : metrics.registry()->Collect()) {
      for (const auto& m : family.metric) {
        if (family.name != "tensorops_spans_dropped_total") continue;
        out += absl::StrCat(m.label[0].value, "=", m.counter.value, ";");
      }
    }
    return out;
  }();
  // 2 in the hung POST, 4 queued then failed or dropped at the stop, 6
  // over the queue's 4.
  EXPECT_THAT(text, HasSubstr("queue_full=6;"));
  EXPECT_THAT(text, HasSubstr("export_failed=6;"));
}

}  // namespace
}  // namespace tensorops
