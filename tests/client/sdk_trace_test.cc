// What trace context the SDK sends, seen from the server (a stand-in that
// records each call's metadata): the SDK traces only when asked (issue 46).
//   - no traceparent, no new_trace: no `traceparent` and no `tracestate`
//     reach the server, and CallTrace::traceparent is "";
//   - the caller's traceparent (and tracestate): sent once, as is;
//   - new_trace: one new, sampled traceparent, the one CallTrace reports.
// Unary, streamed and async calls alike.
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/client/stand_in_server.h"

namespace tensorops {
namespace {

using ::testing::MatchesRegex;

constexpr char kParent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr char kState[] = "congo=t61rcWkgMzE";

enum class Way { kUnary, kStream, kAsync };

class SdkTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every call refused with a code nobody retries: one attempt each.
    server_ = std::make_unique<testing::StandInServer>(grpc::StatusCode::FAILED_PRECONDITION);
    ASSERT_TRUE(server_->Start());
    ClientOptions options;
    options.target = server_->address();
    auto client = Client::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // One Roll the way `way` says, with `call`; returns what the server saw of it.
  testing::StandInServer::Seen Call(Way way, CallOptions call) {
    const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>{1, 2, 3}, {3}),
                                        Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
    const size_t before = server_->seen().size();
    absl::Status status;
    if (way == Way::kAsync) {
      status = client_->ExecuteFuture("Roll", {}, inputs, call).get().status();
    } else {
      call.transport = way == Way::kStream ? Transport::kStream : Transport::kUnary;
      status = client_->Execute("Roll", {}, inputs, call).status();
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    const std::vector<testing::StandInServer::Seen> seen = server_->seen();
    EXPECT_EQ(seen.size(), before + 1);
    if (seen.size() != before + 1) return {};
    EXPECT_EQ(seen.back().method, way == Way::kStream ? "/tensorops.v1.TensorOps/ExecuteStream"
                                                      : "/tensorops.v1.TensorOps/Execute");
    return seen.back();
  }

  std::unique_ptr<testing::StandInServer> server_;
  std::unique_ptr<Client> client_;
};

constexpr Way kWays[] = {Way::kUnary, Way::kStream, Way::kAsync};

TEST_F(SdkTraceTest, UntracedCallsSendNoTraceContext) {
  for (Way way : kWays) {
    SCOPED_TRACE(static_cast<int>(way));
    CallTrace trace;
    trace.traceparent = "left over";
    CallOptions call;
    call.trace = &trace;
    testing::StandInServer::Seen seen = Call(way, call);
    EXPECT_EQ(seen.Count("traceparent"), 0u) << seen.Get("traceparent");
    EXPECT_EQ(seen.Count("tracestate"), 0u);
    EXPECT_EQ(trace.traceparent, "");
    // A tracestate alone says nothing to a server: not sent either.
    call.tracestate = kState;
    seen = Call(way, call);
    EXPECT_EQ(seen.Count("traceparent"), 0u);
    EXPECT_EQ(seen.Count("tracestate"), 0u);
    // No CallTrace at all: the same.
    call.trace = nullptr;
    EXPECT_EQ(Call(way, call).Count("traceparent"), 0u);
  }
}

TEST_F(SdkTraceTest, TheCallersTraceIsSentAsIs) {
  for (Way way : kWays) {
    SCOPED_TRACE(static_cast<int>(way));
    CallTrace trace;
    CallOptions call;
    call.traceparent = kParent;
    call.tracestate = kState;
    call.new_trace = true;  // the caller's traceparent wins
    call.trace = &trace;
    const testing::StandInServer::Seen seen = Call(way, call);
    EXPECT_EQ(seen.Count("traceparent"), 1u);
    EXPECT_EQ(seen.Get("traceparent"), kParent);
    EXPECT_EQ(seen.Get("tracestate"), kState);
    EXPECT_EQ(trace.traceparent, kParent);
    // The stand-in sends no trace back.
    EXPECT_EQ(trace.server_traceparent, "");
  }
}

TEST_F(SdkTraceTest, ARequestedNewTraceIsSentAndReportedBack) {
  for (Way way : kWays) {
    SCOPED_TRACE(static_cast<int>(way));
    CallTrace first, second;
    CallOptions call;
    call.new_trace = true;
    call.trace = &first;
    const testing::StandInServer::Seen seen = Call(way, call);
    EXPECT_EQ(seen.Count("traceparent"), 1u);
    EXPECT_EQ(seen.Count("tracestate"), 0u);
    ASSERT_THAT(first.traceparent, MatchesRegex("00-[0-9a-f]{32}-[0-9a-f]{16}-01"));
    EXPECT_EQ(seen.Get("traceparent"), first.traceparent);
    // A new trace per call; the caller's tracestate goes with it.
    call.trace = &second;
    call.tracestate = kState;
    const testing::StandInServer::Seen again = Call(way, call);
    EXPECT_EQ(again.Get("traceparent"), second.traceparent);
    EXPECT_EQ(again.Get("tracestate"), kState);
    ASSERT_THAT(second.traceparent, MatchesRegex("00-[0-9a-f]{32}-[0-9a-f]{16}-01"));
    EXPECT_NE(second.traceparent.substr(3, 32), first.traceparent.substr(3, 32));
  }
}

}  // namespace
}  // namespace tensorops
