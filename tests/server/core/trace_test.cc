#include "server/core/trace.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/logging.h"

namespace tensorops {
namespace {

constexpr char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TraceFields Fields(const std::vector<absl::string_view>& traceparent,
                   const std::vector<absl::string_view>& tracestate) {
  TraceFields f;
  f.traceparent.assign(traceparent.begin(), traceparent.end());
  f.tracestate.assign(tracestate.begin(), tracestate.end());
  return f;
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

TEST(TraceTest, ParseTraceparentAsTheSpecSays) {
  struct Row {
    std::string text;
    bool valid;
  };
  const Row kRows[] = {
      {kValid, true},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
      // A later version may append fields after a '-'.
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
      // Version 00 is exactly 55 characters.
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", false},
      {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
      {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
      {"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", false},
      {"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
      {"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
      {"", false},
      {"garbage", false},
  };
  for (const Row& row : kRows) {
    SCOPED_TRACE(row.text);
    EXPECT_EQ(ParseTraceparent(row.text).has_value(), row.valid);
  }
  const std::optional<TraceParent> p = ParseTraceparent(kValid);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->trace_id[0], 0x4b);
  EXPECT_EQ(p->span_id[7], 0xb7);
  EXPECT_EQ(p->flags, 1);
}

TEST(TraceTest, ValidParentKeepsTheTraceAndGetsANewSpan) {
  const TraceContext t = TraceContext::Start(Fields({kValid}, {"congo=t61rcWkgMzE"}));
  EXPECT_EQ(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parent_span_id_hex(), "00f067aa0ba902b7");
  EXPECT_NE(t.span_id_hex(), "00f067aa0ba902b7");
  EXPECT_TRUE(ParseTraceparent(t.traceparent()).has_value()) << t.traceparent();
  EXPECT_TRUE(absl::EndsWith(t.traceparent(), "-01"));
  EXPECT_TRUE(t.sampled());
  EXPECT_EQ(t.tracestate(), "congo=t61rcWkgMzE");
  // Not sampled by the caller: passed on as such.
  const TraceContext quiet =
      TraceContext::Start(Fields({"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, {}));
  EXPECT_FALSE(quiet.sampled());
  EXPECT_TRUE(absl::EndsWith(quiet.traceparent(), "-00"));
}

TEST(TraceTest, MissingOrMalformedStartsANewTrace) {
  for (const std::vector<absl::string_view>& sent : std::vector<std::vector<absl::string_view>>{
           {}, {"00-zz"}, {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}) {
    const TraceContext t = TraceContext::Start(Fields(sent, {"vendor=dropped"}));
    EXPECT_TRUE(ParseTraceparent(t.traceparent()).has_value()) << t.traceparent();
    EXPECT_TRUE(IsLowerHex(t.trace_id_hex()));
    EXPECT_EQ(t.parent_span_id_hex(), "");
    // tracestate goes with a valid traceparent only.
    EXPECT_EQ(t.tracestate(), "");
    EXPECT_TRUE(t.sampled());
  }
}

TEST(TraceTest, IdsAreUnique) {
  std::set<std::string> traces;
  std::set<std::string> spans;
  for (int i = 0; i < 10000; ++i) {
    const TraceContext t = TraceContext::Start(TraceFields());
    traces.emplace(t.trace_id_hex());
    spans.emplace(t.span_id_hex());
  }
  EXPECT_EQ(traces.size(), 10000u);
  EXPECT_EQ(spans.size(), 10000u);
}

TEST(TraceTest, ServerTimingText) {
  ServerTiming timing;
  timing.total = absl::Microseconds(2501);
  EXPECT_EQ(RenderServerTiming(timing), "total;dur=2.501");
  timing.queue = absl::Microseconds(12);
  timing.kernel = absl::Microseconds(2310);
  EXPECT_EQ(RenderServerTiming(timing), "queue;dur=0.012, kernel;dur=2.310, total;dur=2.501");
  timing.total = absl::Hours(100000);  // absurd, but no overflow of the buffer
  EXPECT_THAT(RenderServerTiming(timing), ::testing::HasSubstr("total;dur="));
}

TEST(TraceTest, LogScopesNest) {
  // Smoke: the scope restores the outer ids (the lines themselves are
  // checked end to end in trace_python_test.py).
  const LogCallScope outer("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
  { const LogCallScope inner("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"); }
  Log(LogLevel::kInfo, "trace_test: this line ends with trace_id=4bf92f35...");
}

}  // namespace
}  // namespace tensorops
