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
#include "prometheus/registry.h"
#include "rapidjson/document.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

SpanRecord Span(absl::string_view op, bool with_stages) {
  SpanRecord s;
  s.SetTrace(TraceContext::Start("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                 "congo=t61rcWkgMzE"));
  s.method = "Execute";
  s.code_attribute = "rpc.grpc.status_code";
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
  const std::string json = EncodeOtlpJson({Span("Roll", true), failed}, "tensorops-server");
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError()) << json;
  const auto& rs = doc["resourceSpans"][0];
  const auto& resource_attr = rs["resource"]["attributes"][0];
  EXPECT_STREQ(resource_attr["key"].GetString(), "service.name");
  EXPECT_STREQ(resource_attr["value"]["stringValue"].GetString(), "tensorops-server");
  const auto& spans = rs["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.Size(), 4u);  // the call, queue, kernel; the failed call
  const auto& call = spans[0];
  EXPECT_STREQ(call["traceId"].GetString(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_STREQ(call["parentSpanId"].GetString(), "00f067aa0ba902b7");
  EXPECT_EQ(std::string(call["spanId"].GetString()).size(), 16u);
  EXPECT_STREQ(call["traceState"].GetString(), "congo=t61rcWkgMzE");
  EXPECT_STREQ(call["name"].GetString(), "Execute");
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
  const auto& bad = spans[3];
  EXPECT_EQ(bad["status"]["code"].GetInt(), 2);
  EXPECT_STREQ(bad["status"]["message"].GetString(), "axes[0] = 9 is out of range");
  // Escaped, and a byte that is not UTF-8 replaced.
  EXPECT_STREQ(Attribute(bad, "tensorops.op")["stringValue"].GetString(), "Ro\"ll\n?");
  EXPECT_STREQ(Attribute(bad, "tensorops.code")["stringValue"].GetString(), "INVALID_ARGUMENT");
}

TEST(SpanExportTest, BatchesAreSentOffTheCallersThread) {
  absl::Mutex mu;
  std::vector<std::string> bodies;
  SpanExporter::Options options;
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
