// Refusals a program can act on (issue 36): a refusal the server decides
// itself carries when to come back and which budget, on both doors, against
// the real binary.
//   - gRPC: grpc-status-details-bin holds a google.rpc.Status (same code and
//     message) with RetryInfo and ErrorInfo, decoded here with the
//     google.rpc messages of proto/google/rpc/, and the trailer
//     grpc-retry-pushback-ms carries the same delay (-1 where no wait helps).
//   - REST: the 503 carries Retry-After; a request that can never fit (larger
//     than the whole in-flight budget) is a 413 without it.
// Each refusal on both doors: the queue full, the in-flight budget busy, a
// request over the whole budget, the drain (the HTTP connection cap's
// Retry-After is in http_limits_e2e_test.cc). The kernel gate
// (tests/harness/kernel_gate.h) holds the only kernel thread, so the queue
// or the budget stays full for as long as the test says.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/checked_roll.h"
#include "tests/harness/http_get.h"
#include "tests/harness/http_post.h"
#include "tests/harness/kernel_gate.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

// A small REST infer of Reverse (64 elements), as a refused caller sends it.
testing::HttpPostAnswer PostSmallReverse(int port) {
  const testing::ReverseInfer infer = testing::ReverseInferBody(64);
  testing::HttpPostOptions options;
  options.headers = infer.headers;
  return testing::HttpPost(port, "/v2/models/Reverse/infer", infer.body, options);
}

using ::testing::HasSubstr;
using testing::KernelGate;

constexpr char kServer[] = TENSOROPS_SERVER_PATH;

// The value of an unlabelled gauge in the server's /metrics; -1 if absent.
double Gauge(const testing::ServerProcess& server, const std::string& name) {
  absl::StatusOr<std::string> body = testing::HttpGet(server.metrics_port(), "/metrics");
  if (!body.ok()) return -1;
  absl::StatusOr<double> v = testing::FindSample(*body, name, {});
  return v.ok() ? *v : -1;
}

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

struct Refusal {
  grpc::Status status;
  std::multimap<grpc::string_ref, grpc::string_ref> trailers;
  std::string pushback;  // grpc-retry-pushback-ms, "" when absent
  google::rpc::Status details;
  bool details_parsed = false;
};

Refusal Execute(v1::TensorOps::Stub* stub, const v1::ExecuteRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ExecuteResponse response;
  Refusal r;
  r.status = stub->Execute(&ctx, request, &response);
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    if (key == "grpc-retry-pushback-ms") r.pushback.assign(value.data(), value.size());
  }
  r.details_parsed = r.details.ParseFromString(r.status.error_details());
  return r;
}

// The detail of type M in `details`, if there is exactly one.
template <typename M>
std::optional<M> Detail(const google::rpc::Status& details) {
  std::optional<M> found;
  for (const auto& any : details.details()) {
    if (any.type_url() != "type.googleapis.com/" + M::descriptor()->full_name()) continue;
    M m;
    if (found.has_value() || !m.ParseFromString(any.value())) return std::nullopt;
    found = m;
  }
  return found;
}

// A Roll of `bytes` bytes of INT32 (the held call).
v1::ExecuteRequest BigRoll(int64_t bytes) {
  v1::ExecuteRequest req = testing::CheckedRollRequest();
  v1::Tensor* data = req.mutable_inputs(0);
  data->clear_int32_data();
  data->clear_shape();
  data->add_shape(bytes / 4 / 256);
  data->add_shape(256);
  data->set_raw_data(std::string(bytes, '\1'));
  return req;
}

TEST(RefusalDetailsTest, QueueFullCarriesRetryInfoOnBothDoors) {
  KernelGate gate;
  ASSERT_TRUE(gate.shut_ok());
  auto server = testing::StartTestServer(kServer, {"--threads=1", "--max_queue=1", gate.Flag(),
                                                   "--inline_max_bytes=0", "--http_port=0"});
  ASSERT_NE(server, nullptr);
  auto held = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  auto queued = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  auto refused = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));

  // One call runs (held at the gate), one waits in the queue: it is full.
  Refusal held_r, queued_r;
  std::thread held_thread([&] { held_r = Execute(held.get(), BigRoll(1 << 20)); });
  ASSERT_TRUE(WaitFor([&] { return Gauge(*server, "tensorops_inflight_requests") == 1; }));
  std::thread queued_thread(
      [&] { queued_r = Execute(queued.get(), testing::CheckedRollRequest()); });
  const bool full = WaitFor([&] { return Gauge(*server, "tensorops_queue_depth") == 1; });

  Refusal r;
  testing::HttpPostAnswer rest;
  if (full) {
    r = Execute(refused.get(), testing::CheckedRollRequest());
    rest = PostSmallReverse(server->http_port());
  }
  gate.Open();
  held_thread.join();
  queued_thread.join();
  ASSERT_TRUE(full) << "the queue never filled";
  EXPECT_TRUE(held_r.status.ok()) << held_r.status.error_message();
  EXPECT_TRUE(queued_r.status.ok()) << queued_r.status.error_message();

  // gRPC: the code and message as before, the details decodable.
  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("--max_queue=1"));
  ASSERT_TRUE(r.details_parsed);
  EXPECT_EQ(r.details.code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(r.details.message(), r.status.error_message());
  std::optional<google::rpc::RetryInfo> retry = Detail<google::rpc::RetryInfo>(r.details);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->retry_delay().seconds(), 0);
  EXPECT_EQ(retry->retry_delay().nanos(), 50'000'000);
  std::optional<google::rpc::ErrorInfo> info = Detail<google::rpc::ErrorInfo>(r.details);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "QUEUE_FULL");
  EXPECT_EQ(info->domain(), "tensorops");
  EXPECT_EQ(info->metadata().at("flag"), "--max_queue");
  EXPECT_EQ(info->metadata().at("limit"), "1");
  EXPECT_EQ(r.pushback, "50");

  // REST: 503, Retry-After in whole seconds (50 ms rounds up to 1).
  EXPECT_EQ(rest.status, 503) << rest.error << rest.body;
  EXPECT_EQ(rest.Field("Retry-After"), "1");
  EXPECT_THAT(rest.body, HasSubstr("--max_queue=1"));
}

TEST(RefusalDetailsTest, RequestOverTheBudgetSaysNoRetryHelps) {
  auto server = testing::StartTestServer(kServer, {"--max_inflight_bytes=100000", "--http_port=0"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  const Refusal r = Execute(stub.get(), BigRoll(1 << 20));
  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(r.details_parsed);
  EXPECT_FALSE(Detail<google::rpc::RetryInfo>(r.details).has_value());
  std::optional<google::rpc::ErrorInfo> info = Detail<google::rpc::ErrorInfo>(r.details);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "REQUEST_OVER_INFLIGHT_BUDGET");
  EXPECT_EQ(info->metadata().at("flag"), "--max_inflight_bytes");
  EXPECT_EQ(info->metadata().at("limit"), "100000");
  // gRPC's retry policy of any client stops here instead of retrying.
  EXPECT_EQ(r.pushback, "-1");

  // REST: 413 (it can never fit, so no Retry-After), before its body is read.
  const testing::ReverseInfer infer = testing::ReverseInferBody(1 << 20);
  testing::HttpPostOptions options;
  options.headers = infer.headers;
  options.header_only = true;
  const testing::HttpPostAnswer rest =
      testing::HttpPost(server->http_port(), "/v2/models/Reverse/infer", infer.body, options);
  EXPECT_EQ(rest.status, 413) << rest.error << rest.body;
  EXPECT_EQ(rest.Field("Retry-After"), "");
  EXPECT_THAT(rest.body, HasSubstr("--max_inflight_bytes=100000"));
  EXPECT_FALSE(rest.body_sent);

  // A request error (a bad attribute) carries no retry details at all.
  v1::ExecuteRequest bad = testing::CheckedRollRequest();
  bad.set_op("NoSuchOp");
  const Refusal b = Execute(stub.get(), bad);
  EXPECT_EQ(b.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(b.status.error_details().empty());
  EXPECT_EQ(b.pushback, "");
}

// A call held at the gate takes 2 MiB (request + response) of a 3 MiB
// budget: the next MiB-sized call on either door waits for it.
TEST(RefusalDetailsTest, BusyBudgetCarriesRetryInfoOnBothDoors) {
  KernelGate gate;
  ASSERT_TRUE(gate.shut_ok());
  auto server =
      testing::StartTestServer(kServer, {"--threads=1", "--max_inflight_bytes=3145728", gate.Flag(),
                                         "--inline_max_bytes=0", "--http_port=0"});
  ASSERT_NE(server, nullptr);
  auto held = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  auto refused = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  Refusal held_r;
  std::thread held_thread([&] { held_r = Execute(held.get(), BigRoll(1 << 20)); });
  const bool busy = WaitFor([&] { return Gauge(*server, "tensorops_inflight_requests") == 1; });
  Refusal r;
  testing::HttpPostAnswer rest;
  if (busy) {
    r = Execute(refused.get(), BigRoll(1 << 20));
    // 1.5 MiB declared: under the budget, over what is free of it.
    const testing::ReverseInfer infer = testing::ReverseInferBody(3 << 19);
    testing::HttpPostOptions options;
    options.headers = infer.headers;
    rest = testing::HttpPost(server->http_port(), "/v2/models/Reverse/infer", infer.body, options);
  }
  gate.Open();
  held_thread.join();
  ASSERT_TRUE(busy) << "the held call never ran";
  EXPECT_TRUE(held_r.status.ok()) << held_r.status.error_message();

  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr("in-flight byte budget exhausted"));
  ASSERT_TRUE(r.details_parsed);
  std::optional<google::rpc::RetryInfo> retry = Detail<google::rpc::RetryInfo>(r.details);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->retry_delay().seconds(), 0);
  EXPECT_EQ(retry->retry_delay().nanos(), 100'000'000);
  std::optional<google::rpc::ErrorInfo> info = Detail<google::rpc::ErrorInfo>(r.details);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "INFLIGHT_BYTES_EXHAUSTED");
  EXPECT_EQ(info->metadata().at("flag"), "--max_inflight_bytes");
  EXPECT_EQ(info->metadata().at("limit"), "3145728");
  EXPECT_EQ(info->metadata().count("in_use"), 1);
  EXPECT_EQ(r.pushback, "100");

  // REST: 503, Retry-After in whole seconds (100 ms rounds up to 1).
  EXPECT_EQ(rest.status, 503) << rest.error << rest.body;
  EXPECT_EQ(rest.Field("Retry-After"), "1");
  EXPECT_THAT(rest.body, HasSubstr("--max_inflight_bytes=3145728"));
}

// While the server drains (SIGTERM, a call still running), every new call
// is refused UNAVAILABLE with the drain's delay, on both doors; the running
// call still ends OK and the server exits 0.
TEST(RefusalDetailsTest, DrainCarriesRetryInfoOnBothDoors) {
  KernelGate gate;
  ASSERT_TRUE(gate.shut_ok());
  auto server = testing::StartTestServer(
      kServer,
      {"--threads=1", gate.Flag(), "--inline_max_bytes=0", "--http_port=0", "--drain_timeout=60s"});
  ASSERT_NE(server, nullptr);
  auto held = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  auto refused = v1::TensorOps::NewStub(testing::NewTestChannel(server->address()));
  // Connected before the signal (the drain keeps serving open connections).
  std::shared_ptr<grpc::Channel> channel = testing::NewTestChannel(server->address());
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  refused = v1::TensorOps::NewStub(channel);
  Refusal held_r;
  std::thread held_thread([&] { held_r = Execute(held.get(), BigRoll(1 << 20)); });
  bool draining = WaitFor([&] { return Gauge(*server, "tensorops_inflight_requests") == 1; });
  Refusal r;
  testing::HttpPostAnswer rest;
  if (draining) {
    EXPECT_TRUE(server->Signal(SIGTERM));
    // Readiness turns false at the signal, admission closes right after it.
    draining = WaitFor(
        [&] { return !testing::HttpGet(server->http_port(), "/v2/health/ready", 2000).ok(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (draining) {
    r = Execute(refused.get(), testing::CheckedRollRequest());
    rest = PostSmallReverse(server->http_port());
  }
  gate.Open();
  held_thread.join();
  ASSERT_TRUE(draining) << "the server never drained";
  EXPECT_TRUE(held_r.status.ok()) << held_r.status.error_message();
  EXPECT_EQ(server->WaitForExit(30000), 0);

  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  ASSERT_TRUE(r.details_parsed);
  EXPECT_EQ(r.details.code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  std::optional<google::rpc::RetryInfo> retry = Detail<google::rpc::RetryInfo>(r.details);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->retry_delay().seconds(), 0);
  EXPECT_EQ(retry->retry_delay().nanos(), 200'000'000);
  std::optional<google::rpc::ErrorInfo> info = Detail<google::rpc::ErrorInfo>(r.details);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "DRAINING");
  EXPECT_EQ(r.pushback, "200");

  // REST: 503, Retry-After in whole seconds (200 ms rounds up to 1).
  EXPECT_EQ(rest.status, 503) << rest.error << rest.body;
  EXPECT_EQ(rest.Field("Retry-After"), "1");
  EXPECT_THAT(rest.body, HasSubstr("shutting down"));
}

}  // namespace
}  // namespace tensorops
