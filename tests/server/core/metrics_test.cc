// server/core/metrics.cc, checked through what Prometheus actually sees:
// every test scrapes GET /metrics (server/metrics_http/) from the one Exposer
// of this binary and compares exact sample values. The doors' rows are
// registered as the server registers them (GrpcServer::RegisterMetrics,
// HttpServer::RegisterMetrics), so the whole /metrics is checked.
//
// Tests share one Metrics (an Exposer takes ~2 s to shut down after a scrape),
// so each test records into its own children: Execute -> op "Roll", kernel ->
// "ReverseSequence", dropped -> "onnx.ReverseSequence", unknown ops -> "unknown",
// and the gauges only in GaugesHoldTheirValues. "Reverse" is never touched.
// With that, absolute values are exact in any test order or filter.
#include "server/core/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iomanip>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/grpc/grpc_metrics.h"
#include "server/grpc/grpc_server.h"
#include "server/http/connection_metrics.h"
#include "server/http/http_server.h"
#include "server/metrics_http/metrics_http.h"
#include "tests/harness/http_get.h"

namespace tensorops {
namespace {

using Labels = std::map<std::string, std::string>;
using ::tensorops::testing::FindSample;
using ::tensorops::testing::HttpGet;
using ::testing::HasSubstr;

const std::vector<std::string> kOps = {"Reverse", "ReverseSequence", "Roll",
                                       "onnx.ReverseSequence"};
const std::vector<std::string> kCodes = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
const std::vector<double> kDurationBuckets = {5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4,  2.5e-4, 5e-4,
                                              1e-3, 2.5e-3, 5e-3,   0.01, 0.025, 0.05,   0.1,
                                              0.25, 0.5,    1,      2.5,  5,     10};
const std::vector<double> kSizeBuckets = {64,       256,       1024,      4096,    16384,
                                          65536,    262144,    1048576,   4194304, 16777216,
                                          67108864, 268435456, 1073741824};

// prometheus-cpp prints bounds its own way ("5e-06"); FindSample matches
// "le" numerically, so any round-tripping spelling will do.
std::string Le(double bound) {
  std::ostringstream out;
  out << std::setprecision(17) << bound;
  return out.str();
}

double Value(const std::string& body, const std::string& name, const Labels& labels) {
  absl::StatusOr<double> v = FindSample(body, name, labels);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::nan("");
}

Labels With(Labels labels, const std::string& key, const std::string& value) {
  labels[key] = value;
  return labels;
}

// Checks one histogram child against a reference computed from the values
// observed into it: every cumulative bucket, +Inf, _count and _sum.
void ExpectHistogram(const std::string& body, const std::string& name, const Labels& labels,
                     const std::vector<double>& bounds, const std::vector<double>& observed) {
  SCOPED_TRACE(name);
  for (double bound : bounds) {
    SCOPED_TRACE(absl::StrCat("le=", Le(bound)));
    double want = 0;
    for (double v : observed) want += v <= bound ? 1 : 0;
    EXPECT_EQ(Value(body, name + "_bucket", With(labels, "le", Le(bound))), want);
  }
  double sum = 0;
  for (double v : observed) sum += v;
  EXPECT_EQ(Value(body, name + "_bucket", With(labels, "le", "+Inf")),
            static_cast<double>(observed.size()));
  EXPECT_EQ(Value(body, name + "_count", labels), static_cast<double>(observed.size()));
  EXPECT_EQ(Value(body, name + "_sum", labels), sum);
}

class MetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    metrics_ = new Metrics(kOps);
    GrpcServer::RegisterMetrics(metrics_);
    HttpServer::RegisterMetrics(metrics_);
    grpc_ = new GrpcMethods(GrpcMethods::Register(metrics_));
    grpc_connections_ = RegisterGrpcConnections(metrics_);
    http_connections_ = RegisterHttpConnections(metrics_);
    http_ = new MetricsHttpServer(metrics_->registry());
    absl::StatusOr<int> port = http_->Start("127.0.0.1", 0);
    if (!port.ok()) {
      setup_error_ = port.status();
      return;
    }
    port_ = *port;
    // Before any test records anything.
    absl::StatusOr<std::string> body = HttpGet(port_, "/metrics");
    if (!body.ok()) {
      setup_error_ = body.status();
      return;
    }
    initial_ = new std::string(*body);
  }
  static void TearDownTestSuite() {
    delete http_;
    http_ = nullptr;
    delete grpc_;
    grpc_ = nullptr;
    delete metrics_;
    metrics_ = nullptr;
    delete initial_;
    initial_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.ok()) << setup_error_;
    ASSERT_GT(port_, 0);
  }

  static std::string Scrape() {
    absl::StatusOr<std::string> body = HttpGet(port_, "/metrics");
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : "";
  }

  static Metrics* metrics_;
  static MetricsHttpServer* http_;
  static GrpcMethods* grpc_;
  static const ConnectionMetrics* grpc_connections_;
  static const ConnectionMetrics* http_connections_;
  static int port_;
  static std::string* initial_;
  static absl::Status setup_error_;
};

Metrics* MetricsTest::metrics_ = nullptr;
MetricsHttpServer* MetricsTest::http_ = nullptr;
GrpcMethods* MetricsTest::grpc_ = nullptr;
const ConnectionMetrics* MetricsTest::grpc_connections_ = nullptr;
const ConnectionMetrics* MetricsTest::http_connections_ = nullptr;
int MetricsTest::port_ = 0;
std::string* MetricsTest::initial_ = nullptr;
absl::Status MetricsTest::setup_error_;

TEST_F(MetricsTest, EveryFamilyHasHelpAndType) {
  const struct {
    const char* name;
    const char* type;
  } kFamilies[] = {
      {"tensorops_requests_total", "counter"},
      {"tensorops_request_duration_seconds", "histogram"},
      {"tensorops_queue_duration_seconds", "histogram"},
      {"tensorops_kernel_duration_seconds", "histogram"},
      {"tensorops_request_size_bytes", "histogram"},
      {"tensorops_response_size_bytes", "histogram"},
      {"tensorops_dropped_requests_total", "counter"},
      {"tensorops_rejected_requests_total", "counter"},
      {"tensorops_retried_calls_total", "counter"},
      {"tensorops_chain_steps_total", "counter"},
      {"tensorops_inflight_requests", "gauge"},
      {"tensorops_inflight_bytes", "gauge"},
      {"tensorops_queue_depth", "gauge"},
      {"tensorops_pool_threads", "gauge"},
      {"tensorops_stream_bytes_total", "counter"},
      {"tensorops_shared_memory_regions", "gauge"},
      {"tensorops_call_seconds_total", "counter"},
      {"tensorops_last_call_timestamp_seconds", "gauge"},
      {"tensorops_http_connections", "gauge"},
      {"tensorops_http_connections_closed_total", "counter"},
      {"tensorops_grpc_connections", "gauge"},
      {"tensorops_grpc_connections_refused_total", "counter"},
      {"tensorops_spans_exported_total", "counter"},
      {"tensorops_spans_dropped_total", "counter"},
  };
  // The Exposer adds its own exposer_* families; count only ours.
  int help_lines = 0;
  for (absl::string_view line : absl::StrSplit(*initial_, '\n')) {
    help_lines += absl::StartsWith(line, "# HELP tensorops_") ? 1 : 0;
  }
  EXPECT_EQ(help_lines, static_cast<int>(std::size(kFamilies))) << "unexpected extra family";
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const std::string help = absl::StrCat("# HELP ", family.name, " ");
    const size_t at = initial_->find(help);
    ASSERT_NE(at, std::string::npos);
    const std::string text =
        initial_->substr(at + help.size(), initial_->find('\n', at) - at - help.size());
    EXPECT_GT(text.size(), 20u) << "help text too short to help: " << text;
    EXPECT_THAT(*initial_, HasSubstr(absl::StrCat("# TYPE ", family.name, " ", family.type, "\n")));
  }
}

TEST_F(MetricsTest, EveryChildExistsAtZeroBeforeAnyRequest) {
  const std::string& body = *initial_;
  std::vector<std::string> any_ops = kOps;
  any_ops.push_back("unknown");
  for (const std::string& code : kCodes) {
    SCOPED_TRACE(code);
    for (const std::string& op : any_ops) {
      SCOPED_TRACE(op);
      EXPECT_EQ(Value(body, "tensorops_requests_total",
                      {{"method", "Execute"}, {"op", op}, {"code", code}}),
                0);
    }
    EXPECT_EQ(Value(body, "tensorops_requests_total",
                    {{"method", "ListOps"}, {"op", "none"}, {"code", code}}),
              0);
    // No method/op combination other than the ones above.
    EXPECT_FALSE(FindSample(body, "tensorops_requests_total",
                            {{"method", "ListOps"}, {"op", "Roll"}, {"code", code}})
                     .ok());
    EXPECT_FALSE(FindSample(body, "tensorops_requests_total",
                            {{"method", "Execute"}, {"op", "none"}, {"code", code}})
                     .ok());
  }
  for (const std::string& op : any_ops) {
    SCOPED_TRACE(op);
    ExpectHistogram(body, "tensorops_request_duration_seconds", {{"method", "Execute"}, {"op", op}},
                    kDurationBuckets, {});
    ExpectHistogram(body, "tensorops_request_size_bytes", {{"op", op}}, kSizeBuckets, {});
    ExpectHistogram(body, "tensorops_response_size_bytes", {{"op", op}}, kSizeBuckets, {});
  }
  ExpectHistogram(body, "tensorops_request_duration_seconds",
                  {{"method", "ListOps"}, {"op", "none"}}, kDurationBuckets, {});
  for (const std::string& op : kOps) {
    SCOPED_TRACE(op);
    ExpectHistogram(body, "tensorops_queue_duration_seconds", {{"op", op}}, kDurationBuckets, {});
    ExpectHistogram(body, "tensorops_kernel_duration_seconds", {{"op", op}}, kDurationBuckets, {});
    for (const char* reason : {"deadline", "cancelled", "shutdown"}) {
      EXPECT_EQ(Value(body, "tensorops_dropped_requests_total", {{"op", op}, {"reason", reason}}),
                0);
    }
  }
  // Unknown ops never reach the queue or a kernel: no such children.
  EXPECT_EQ(FindSample(body, "tensorops_queue_duration_seconds_count", {{"op", "unknown"}})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  for (const char* limit : {"queue", "inflight_bytes"}) {
    EXPECT_EQ(Value(body, "tensorops_rejected_requests_total", {{"limit", limit}}), 0);
  }
  EXPECT_EQ(Value(body, "tensorops_spans_exported_total", {}), 0);
  for (const char* reason : {"queue_full", "export_failed"}) {
    EXPECT_EQ(Value(body, "tensorops_spans_dropped_total", {{"reason", reason}}), 0);
  }
  for (const char* gauge : {"tensorops_inflight_requests", "tensorops_inflight_bytes",
                            "tensorops_queue_depth", "tensorops_pool_threads"}) {
    EXPECT_EQ(Value(body, gauge, {}), 0) << gauge;
  }
  // Exactly the documented buckets, nothing more: 20 bounds + +Inf.
  int roll_buckets = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    roll_buckets += absl::StartsWith(line, "tensorops_kernel_duration_seconds_bucket{") &&
                            absl::StrContains(line, "op=\"Roll\"")
                        ? 1
                        : 0;
  }
  EXPECT_EQ(roll_buckets, 21);
}

TEST_F(MetricsTest, OpIndexMapsNamesAndEverythingElseToUnknown) {
  const int unknown = static_cast<int>(kOps.size());
  const struct {
    const char* name;
    int want;
  } kRows[] = {
      {"Reverse", 0},       {"ReverseSequence", 1}, {"Roll", 2},   {"onnx.ReverseSequence", 3},
      {"roll", unknown},    {"Roll ", unknown},     {"", unknown}, {"NoSuchOp", unknown},
      {"unknown", unknown}, {"none", unknown},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(metrics_->OpIndex(row.name), row.want);
  }
}

TEST_F(MetricsTest, ExecuteCountsByCodeAndObservesDurationAndSizes) {
  const int roll = metrics_->OpIndex("Roll");
  // Dyadic durations print exactly; 0.25 lands on a bucket bound (le is <=);
  // the last sizes exceed every bound (+Inf only).
  const std::vector<double> durations = {0.0078125, 0.25, 3.0517578125e-05};
  const std::vector<double> request_bytes = {1000, 64, 1073741824};
  const std::vector<double> response_bytes = {70000, 0, 2147483648};
  const absl::StatusCode codes[] = {absl::StatusCode::kOk, absl::StatusCode::kOk,
                                    absl::StatusCode::kInvalidArgument};
  for (size_t i = 0; i < durations.size(); ++i) {
    metrics_->RecordCall(grpc_->execute, roll, codes[i], durations[i],
                         static_cast<int64_t>(request_bytes[i]),
                         static_cast<int64_t>(response_bytes[i]));
  }
  const std::string body = Scrape();
  for (const std::string& code : kCodes) {
    SCOPED_TRACE(code);
    const double want = code == "OK" ? 2 : code == "INVALID_ARGUMENT" ? 1 : 0;
    EXPECT_EQ(Value(body, "tensorops_requests_total",
                    {{"method", "Execute"}, {"op", "Roll"}, {"code", code}}),
              want);
    // The untouched op stays at zero.
    EXPECT_EQ(Value(body, "tensorops_requests_total",
                    {{"method", "Execute"}, {"op", "Reverse"}, {"code", code}}),
              0);
  }
  ExpectHistogram(body, "tensorops_request_duration_seconds",
                  {{"method", "Execute"}, {"op", "Roll"}}, kDurationBuckets, durations);
  ExpectHistogram(body, "tensorops_request_size_bytes", {{"op", "Roll"}}, kSizeBuckets,
                  request_bytes);
  ExpectHistogram(body, "tensorops_response_size_bytes", {{"op", "Roll"}}, kSizeBuckets,
                  response_bytes);
  ExpectHistogram(body, "tensorops_request_size_bytes", {{"op", "Reverse"}}, kSizeBuckets, {});
  // The whole-request histogram is separate from queue/kernel time.
  ExpectHistogram(body, "tensorops_kernel_duration_seconds", {{"op", "Roll"}}, kDurationBuckets,
                  {});
}

TEST_F(MetricsTest, ChainStepsCountTheOpOfEachStep) {
  OpDef roll, reverse;
  roll.spec.name = "Roll";
  reverse.spec.name = "Reverse";
  const OpDef* const steps[] = {&roll, &reverse, &roll};
  const std::string before = Scrape();
  metrics_->RecordChainSteps(steps);
  metrics_->RecordChainSteps({});  // a single op: nothing
  const std::string body = Scrape();
  for (const auto& [op, want] :
       {std::pair<std::string, double>{"Roll", 2}, {"Reverse", 1}, {"ReverseSequence", 0}}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(Value(body, "tensorops_chain_steps_total", {{"op", op}}) -
                  Value(before, "tensorops_chain_steps_total", {{"op", op}}),
              want);
  }
}

TEST_F(MetricsTest, UnknownOpNamesAreRecordedAsUnknown) {
  const int unknown = metrics_->OpIndex("NoSuchOp");
  // Drops are shared with another test: compare against a scrape taken first.
  const std::string before = Scrape();
  metrics_->RecordCall(grpc_->execute, unknown, absl::StatusCode::kNotFound, 0.0009765625, 10, 0);
  // Never called by the service for unknown ops, but must be harmless.
  metrics_->RecordKernel(unknown, 1.0, 1.0);
  metrics_->RecordDropped(unknown, Metrics::DropReason::kDeadline);
  const std::string body = Scrape();
  EXPECT_EQ(Value(body, "tensorops_requests_total",
                  {{"method", "Execute"}, {"op", "unknown"}, {"code", "NOT_FOUND"}}),
            1);
  for (const std::string& op : kOps) {
    SCOPED_TRACE(op);
    EXPECT_EQ(Value(body, "tensorops_requests_total",
                    {{"method", "Execute"}, {"op", op}, {"code", "NOT_FOUND"}}),
              0);
    const Labels deadline = {{"op", op}, {"reason", "deadline"}};
    EXPECT_EQ(Value(body, "tensorops_dropped_requests_total", deadline),
              Value(before, "tensorops_dropped_requests_total", deadline));
  }
  ExpectHistogram(body, "tensorops_request_duration_seconds",
                  {{"method", "Execute"}, {"op", "unknown"}}, kDurationBuckets, {0.0009765625});
  ExpectHistogram(body, "tensorops_request_size_bytes", {{"op", "unknown"}}, kSizeBuckets, {10});
  ExpectHistogram(body, "tensorops_response_size_bytes", {{"op", "unknown"}}, kSizeBuckets, {0});
  EXPECT_EQ(FindSample(body, "tensorops_kernel_duration_seconds_count", {{"op", "unknown"}})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(MetricsTest, ExecuteStreamCountsTensorBytesNotMessageSizes) {
  const int reverse = metrics_->OpIndex("Reverse");
  const std::string before = Scrape();
  metrics_->RecordCall(grpc_->execute_stream, reverse, absl::StatusCode::kOk, 0.5, 3000, 2000);
  metrics_->RecordCall(grpc_->execute_stream, reverse, absl::StatusCode::kDataLoss, 0.25, 100, 0);
  const std::string body = Scrape();
  EXPECT_EQ(Value(body, "tensorops_requests_total",
                  {{"method", "ExecuteStream"}, {"op", "Reverse"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(Value(body, "tensorops_requests_total",
                  {{"method", "ExecuteStream"}, {"op", "Reverse"}, {"code", "DATA_LOSS"}}),
            1);
  ExpectHistogram(body, "tensorops_request_duration_seconds",
                  {{"method", "ExecuteStream"}, {"op", "Reverse"}}, kDurationBuckets, {0.5, 0.25});
  EXPECT_EQ(
      Value(body, "tensorops_stream_bytes_total", {{"op", "Reverse"}, {"direction", "received"}}),
      3100);
  EXPECT_EQ(Value(body, "tensorops_stream_bytes_total", {{"op", "Reverse"}, {"direction", "sent"}}),
            2000);
  // Execute's message-size histograms are not touched by a streamed call.
  const Labels reverse_op = {{"op", "Reverse"}};
  EXPECT_EQ(Value(body, "tensorops_request_size_bytes_count", reverse_op),
            Value(before, "tensorops_request_size_bytes_count", reverse_op));
  EXPECT_EQ(Value(body, "tensorops_requests_total",
                  {{"method", "Execute"}, {"op", "Reverse"}, {"code", "OK"}}),
            Value(before, "tensorops_requests_total",
                  {{"method", "Execute"}, {"op", "Reverse"}, {"code", "OK"}}));
  EXPECT_EQ(grpc_->execute_stream->name(), "ExecuteStream");
  EXPECT_EQ(grpc_->execute->name(), "Execute");
}

TEST_F(MetricsTest, ListOpsIsRecordedUnderOpNone) {
  metrics_->RecordCall(grpc_->list_ops, 0, absl::StatusCode::kOk, 0.0001220703125, 0, 0);
  metrics_->RecordCall(grpc_->list_ops, 0, absl::StatusCode::kUnavailable, 0.5, 0, 0);
  const std::string body = Scrape();
  for (const std::string& code : kCodes) {
    SCOPED_TRACE(code);
    const double want = code == "OK" || code == "UNAVAILABLE" ? 1 : 0;
    EXPECT_EQ(Value(body, "tensorops_requests_total",
                    {{"method", "ListOps"}, {"op", "none"}, {"code", code}}),
              want);
  }
  ExpectHistogram(body, "tensorops_request_duration_seconds",
                  {{"method", "ListOps"}, {"op", "none"}}, kDurationBuckets,
                  {0.0001220703125, 0.5});
}

TEST_F(MetricsTest, KernelRecordsQueueAndKernelTime) {
  const int op = metrics_->OpIndex("ReverseSequence");
  const std::vector<double> queue = {0.00048828125, 4.0};
  const std::vector<double> kernel = {0.0625, 0.0009765625};
  for (size_t i = 0; i < queue.size(); ++i) metrics_->RecordKernel(op, queue[i], kernel[i]);
  const std::string body = Scrape();
  ExpectHistogram(body, "tensorops_queue_duration_seconds", {{"op", "ReverseSequence"}},
                  kDurationBuckets, queue);
  ExpectHistogram(body, "tensorops_kernel_duration_seconds", {{"op", "ReverseSequence"}},
                  kDurationBuckets, kernel);
  ExpectHistogram(body, "tensorops_queue_duration_seconds", {{"op", "Reverse"}}, kDurationBuckets,
                  {});
}

TEST_F(MetricsTest, DroppedAndRejectedAreCountedByReasonAndLimit) {
  const int op = metrics_->OpIndex("onnx.ReverseSequence");
  metrics_->RecordDropped(op, Metrics::DropReason::kDeadline);
  metrics_->RecordDropped(op, Metrics::DropReason::kDeadline);
  metrics_->RecordDropped(op, Metrics::DropReason::kCancelled);
  for (int i = 0; i < 3; ++i) metrics_->RecordRejected(Metrics::Limit::kQueue);
  metrics_->RecordRejected(Metrics::Limit::kInflightBytes);
  const std::string body = Scrape();
  const struct {
    const char* reason;
    double want;
  } kDropped[] = {{"deadline", 2}, {"cancelled", 1}, {"shutdown", 0}};
  for (const auto& row : kDropped) {
    SCOPED_TRACE(row.reason);
    EXPECT_EQ(Value(body, "tensorops_dropped_requests_total",
                    {{"op", "onnx.ReverseSequence"}, {"reason", row.reason}}),
              row.want);
    EXPECT_EQ(Value(body, "tensorops_dropped_requests_total",
                    {{"op", "Reverse"}, {"reason", row.reason}}),
              0);
  }
  EXPECT_EQ(Value(body, "tensorops_rejected_requests_total", {{"limit", "queue"}}), 3);
  EXPECT_EQ(Value(body, "tensorops_rejected_requests_total", {{"limit", "inflight_bytes"}}), 1);
}

TEST_F(MetricsTest, GaugesHoldTheirValues) {
  metrics_->SetAdmission(3, int64_t{1} << 20, 9);
  metrics_->SetAdmission(2, (int64_t{1} << 20) - (int64_t{1} << 18), 7);
  metrics_->SetPoolThreads(2);
  std::string body = Scrape();
  EXPECT_EQ(Value(body, "tensorops_inflight_requests", {}), 2);
  EXPECT_EQ(Value(body, "tensorops_inflight_bytes", {}), 786432);
  EXPECT_EQ(Value(body, "tensorops_queue_depth", {}), 7);
  EXPECT_EQ(Value(body, "tensorops_pool_threads", {}), 2);
  // Back to idle.
  metrics_->SetAdmission(0, 0, 0);
  body = Scrape();
  EXPECT_EQ(Value(body, "tensorops_inflight_requests", {}), 0);
  EXPECT_EQ(Value(body, "tensorops_inflight_bytes", {}), 0);
  EXPECT_EQ(Value(body, "tensorops_queue_depth", {}), 0);
}

TEST_F(MetricsTest, HttpConnectionsAndTheirClosingsByReason) {
  using Close = HttpClose;
  const struct {
    Close reason;
    const char* label;
    int times;
  } kRows[] = {
      {Close::kCapIdle, "cap_idle", 3},
      {Close::kCapRefused, "cap_refused", 1},
      {Close::kHeaderTimeout, "header_timeout", 2},
      {Close::kIdleTimeout, "idle_timeout", 4},
      {Close::kBodyRate, "body_rate", 5},
      {Close::kNoDescriptors, "no_descriptors", 6},
  };
  const std::string before = Scrape();
  for (const auto& row : kRows) {
    for (int i = 0; i < row.times; ++i)
      http_connections_->RecordClosed(static_cast<int>(row.reason));
  }
  http_connections_->SetOpen(448);
  const std::string body = Scrape();
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.label);
    const Labels labels = {{"reason", row.label}};
    EXPECT_EQ(Value(body, "tensorops_http_connections_closed_total", labels) -
                  Value(before, "tensorops_http_connections_closed_total", labels),
              row.times);
  }
  EXPECT_EQ(Value(body, "tensorops_http_connections", {}), 448);
  http_connections_->SetOpen(0);
  EXPECT_EQ(Value(Scrape(), "tensorops_http_connections", {}), 0);
}

TEST_F(MetricsTest, GrpcConnectionsAndTheirRefusalsByReason) {
  using Refusal = ConnectionRefusal;
  const struct {
    Refusal reason;
    const char* label;
    int times;
  } kRows[] = {{Refusal::kCap, "cap", 3}, {Refusal::kEmfile, "emfile", 2}};
  const std::string before = Scrape();
  for (const auto& row : kRows) {
    for (int i = 0; i < row.times; ++i)
      grpc_connections_->RecordClosed(static_cast<int>(row.reason));
  }
  grpc_connections_->SetOpen(1792);
  const std::string body = Scrape();
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.label);
    const Labels labels = {{"reason", row.label}};
    EXPECT_EQ(Value(body, "tensorops_grpc_connections_refused_total", labels) -
                  Value(before, "tensorops_grpc_connections_refused_total", labels),
              row.times);
  }
  EXPECT_EQ(Value(body, "tensorops_grpc_connections", {}), 1792);
}

TEST_F(MetricsTest, StartHttpFailuresNameTheAddress) {
  // At most once per Metrics.
  absl::StatusOr<int> again = http_->Start("127.0.0.1", 0);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("127.0.0.1:0"));

  // The port is taken by this binary's exposer. No scrape, so the second
  // Metrics shuts down quickly.
  Metrics other_metrics({"Roll"});
  MetricsHttpServer other(other_metrics.registry());
  absl::StatusOr<int> taken = other.Start("127.0.0.1", port_);
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port_)));

  // And the first exposer still answers.
  EXPECT_TRUE(HttpGet(port_, "/metrics").ok());
}

// civetweb's listener looks at its stop flag once per 2 s poll round; the
// stop knocks it awake instead of waiting for the round's end (a stop of an
// idle server took 1.4 s before, measured). The bound is far from 2 s either
// way, so load on the machine does not decide the result.
TEST(MetricsHttpStopTest, StopsWithinAFractionOfCivetwebsPollRound) {
  for (const char* host : {"127.0.0.1", "0.0.0.0", "localhost"}) {
    Metrics roll({"Roll"});
    MetricsHttpServer metrics(roll.registry());
    absl::StatusOr<int> port = metrics.Start(host, 0);
    ASSERT_TRUE(port.ok()) << host << ": " << port.status();
    ASSERT_TRUE(HttpGet(*port, "/metrics").ok()) << host;
    // Into the listener's poll round, not at its start.
    absl::SleepFor(absl::Milliseconds(200));
    const absl::Time start = absl::Now();
    metrics.Stop();
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(1000)) << host;
    // Gone: nothing answers on the port, and a second stop is a no-op.
    EXPECT_FALSE(HttpGet(*port, "/metrics", 2000).ok()) << host;
    metrics.Stop();
  }
}

TEST_F(MetricsTest, HttpGetReportsNon200AndClosedPorts) {
  absl::StatusOr<std::string> missing = HttpGet(port_, "/no-such-page");
  EXPECT_FALSE(missing.ok());
  // Port 1 on loopback: nothing listens (connection refused).
  absl::StatusOr<std::string> refused = HttpGet(1, "/metrics", 2000);
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("127.0.0.1:1"));
}

// FindSample on hand-written exposition text; no server needed.
TEST(FindSampleTest, MatchesExactLabelSetsInAnyOrder) {
  const std::string body =
      "# HELP x_total Things.\n"
      "# TYPE x_total counter\n"
      "x_total{b=\"2\",a=\"1\"} 5\n"
      "x_total{a=\"1\"} 6\n"
      "x_total_extra{a=\"1\"} 7\n"
      "y 8 1700000000000\n"
      "z{v=\"a \\\"q\\\" } \\\\ b\"} 9\n"
      "h_bucket{le=\"5e-06\"} 10\n"
      "h_bucket{le=\"+Inf\"} 11\n"
      "dup{a=\"1\"} 1\n"
      "dup{a=\"1\"} 2\n";
  const struct {
    const char* name;
    Labels labels;
    double want;  // NaN: expect the error code below
    absl::StatusCode code;
  } kRows[] = {
      {"x_total", {{"a", "1"}, {"b", "2"}}, 5, absl::StatusCode::kOk},
      {"x_total", {{"a", "1"}}, 6, absl::StatusCode::kOk},
      {"x_total_extra", {{"a", "1"}}, 7, absl::StatusCode::kOk},
      {"y", {}, 8, absl::StatusCode::kOk},
      {"z", {{"v", "a \"q\" } \\ b"}}, 9, absl::StatusCode::kOk},
      {"h_bucket", {{"le", "5e-6"}}, 10, absl::StatusCode::kOk},
      {"h_bucket", {{"le", "+Inf"}}, 11, absl::StatusCode::kOk},
      {"x_total", {{"b", "2"}}, NAN, absl::StatusCode::kNotFound},
      {"x_total", {}, NAN, absl::StatusCode::kNotFound},
      {"x", {{"a", "1"}}, NAN, absl::StatusCode::kNotFound},
      {"dup", {{"a", "1"}}, NAN, absl::StatusCode::kFailedPrecondition},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    absl::StatusOr<double> got = FindSample(body, row.name, row.labels);
    EXPECT_EQ(got.status().code(), row.code) << got.status();
    if (got.ok()) {
      EXPECT_EQ(*got, row.want);
    }
  }
}

}  // namespace
}  // namespace tensorops
