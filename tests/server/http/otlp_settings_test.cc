#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http/otlp_client.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

// OtlpSettingsFrom over a fixed environment.
absl::StatusOr<OtlpSettings> From(absl::string_view flag,
                                  const std::map<std::string, std::string>& vars) {
  return OtlpSettingsFrom(flag, [&vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(OtlpSettingsTest, NothingSetExportsNothing) {
  absl::StatusOr<OtlpSettings> s = From("", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->target.has_value());
  EXPECT_EQ(s->service_name, "tensorops-server");
  EXPECT_TRUE(s->sampler.parent_based);
  EXPECT_EQ(s->sampler.root, Sampler::Root::kAlwaysOn);
}

TEST(OtlpSettingsTest, EndpointPathRules) {
  struct Row {
    std::string flag;
    std::map<std::string, std::string> vars;
    std::string host, port, path;
  };
  const Row kRows[] = {
      // The generic endpoint is a base: /v1/traces is appended to its path.
      {"",
       {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}},
       "collector",
       "4318",
       "/v1/traces"},
      {"",
       {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"}},
       "collector",
       "4318",
       "/v1/traces"},
      {"", {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://gw/otel/"}}, "gw", "80", "/otel/v1/traces"},
      // The traces endpoint is used as it is, and wins over the generic one.
      {"",
       {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom/traces"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"}},
       "c",
       "4318",
       "/custom/traces"},
      {"", {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318"}}, "c", "4318", "/"},
      // The flag wins over both.
      {"http://flag:9999",
       {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}},
       "flag",
       "9999",
       "/v1/traces"},
  };
  for (const Row& row : kRows) {
    SCOPED_TRACE(row.flag + " " + row.vars.begin()->second);
    absl::StatusOr<OtlpSettings> s = From(row.flag, row.vars);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->target.has_value());
    EXPECT_EQ(s->target->host, row.host);
    EXPECT_EQ(s->target->port, row.port);
    EXPECT_EQ(s->target->path, row.path);
    EXPECT_EQ(s->target->content_type, "application/x-protobuf");
  }
}

TEST(OtlpSettingsTest, ProtocolServiceAndSampler) {
  absl::StatusOr<OtlpSettings> s = From("", {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                                             {"OTEL_SERVICE_NAME", "ops-a"},
                                             {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                                             {"OTEL_TRACES_SAMPLER_ARG", "0.25"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->encoding, SpanExporter::Encoding::kJson);
  EXPECT_EQ(s->target->content_type, "application/json");
  EXPECT_EQ(s->service_name, "ops-a");
  EXPECT_EQ(s->sampler.root, Sampler::Root::kRatio);
  EXPECT_DOUBLE_EQ(s->sampler.ratio, 0.25);
  EXPECT_TRUE(s->sampler.parent_based);
  // The traces protocol wins over the generic one.
  s = From("", {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->encoding, SpanExporter::Encoding::kProtobuf);
  // Turned off.
  s = From("http://c:4318", {{"OTEL_TRACES_EXPORTER", "none"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->target.has_value());
}

TEST(OtlpSettingsTest, BadValuesNameTheirVariable) {
  struct Row {
    std::map<std::string, std::string> vars;
    std::string names;
  };
  const Row kRows[] = {
      {{{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"}},
       "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
      {{{"OTEL_TRACES_SAMPLER", "sometimes"}}, "OTEL_TRACES_SAMPLER=sometimes"},
      {{{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "1.5"}},
       "OTEL_TRACES_SAMPLER_ARG=1.5"},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318"}}, "OTEL_EXPORTER_OTLP_ENDPOINT="},
  };
  for (const Row& row : kRows) {
    absl::StatusOr<OtlpSettings> s = From("", row.vars);
    ASSERT_FALSE(s.ok()) << row.names;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(row.names));
  }
}

TEST(OtlpSettingsTest, RatioSamplerDecidesNewTracesByTheirId) {
  absl::StatusOr<Sampler> half = ParseSampler("traceidratio", "0.5");
  ASSERT_TRUE(half.ok());
  int sampled = 0;
  for (int i = 0; i < 2000; ++i) {
    if (half->ShouldSample(TraceContext::Start(TraceFields()))) ++sampled;
  }
  EXPECT_GT(sampled, 850);
  EXPECT_LT(sampled, 1150);
  // Not parent-based: the caller's flag does not decide; parent-based: it does.
  TraceFields unsampled;
  unsampled.traceparent.push_back("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  const TraceContext child = TraceContext::Start(unsampled);
  EXPECT_FALSE(ParseSampler("parentbased_always_on", "")->ShouldSample(child));
  EXPECT_TRUE(ParseSampler("always_on", "")->ShouldSample(child));
  EXPECT_FALSE(
      ParseSampler("parentbased_always_off", "")->ShouldSample(TraceContext::Start(TraceFields())));
}

}  // namespace
}  // namespace tensorops
