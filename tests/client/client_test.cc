// The SDK against real tensorops-server processes on 127.0.0.1.
#include "tensorops/client.h"

#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/http_get.h"
#include "tests/harness/kernel_gate.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess;
    // --trace_headers: TraceparentOutAndServerTraceBack reads them back.
    ASSERT_TRUE(
        server_->Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--trace_headers=true"}).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.target = server_->address();
    auto c = Client::Create(options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  static ServerProcess* server_;
  std::unique_ptr<Client> client_;
};
ServerProcess* ClientTest::server_ = nullptr;

const std::vector<int32_t> k4x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

TEST_F(ClientTest, RollSpecExample2) {
  auto out = client_->Roll(Tensor(k4x3, {4, 3}), Tensor(std::vector<int64_t>{-1, 2}),
                           Tensor(std::vector<int64_t>{0, 1}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DataType::kInt32);
  EXPECT_THAT(out->shape(), ElementsAre(4, 3));
  EXPECT_THAT(out->values<int32_t>(), ElementsAre(5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1));
}

TEST_F(ClientTest, ReverseIndexAndMask) {
  const Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto index = client_->Reverse(data, Tensor(std::vector<int64_t>{-1}));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_THAT(index->values<int32_t>(), ElementsAre(3, 2, 1, 6, 5, 4));
  auto mask = client_->Reverse(data, Tensor(std::vector<bool>{true, false}), ReverseMode::kMask);
  ASSERT_TRUE(mask.ok()) << mask.status();
  EXPECT_THAT(mask->values<int32_t>(), ElementsAre(4, 5, 6, 1, 2, 3));
}

TEST_F(ClientTest, ReverseSequenceAndOnnx) {
  auto rs =
      client_->ReverseSequence(Tensor(k4x3, {4, 3}), Tensor(std::vector<float>{3, 2, 1, 0}), 0, 1);
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_THAT(rs->values<int32_t>(), ElementsAre(3, 2, 1, 5, 4, 6, 7, 8, 9, 10, 11, 12));
  auto onnx = client_->OnnxReverseSequence(
      Tensor(std::vector<float>{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, {4, 4}),
      Tensor(std::vector<int64_t>{4, 3, 2, 1}));
  ASSERT_TRUE(onnx.ok()) << onnx.status();
  EXPECT_THAT(onnx->values<float>(),
              ElementsAre(3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15));
}

TEST_F(ClientTest, GenericExecuteWithAlias) {
  auto out = client_->Execute(
      "Roll-7", {}, {Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_THAT((*out)[0].values<int32_t>(), ElementsAre(10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

// Every element type through every op: bytes are moved, so build distinct
// element bit patterns and compare against the permutation each op implies.
TEST_F(ClientTest, EveryElementTypeThroughEveryOp) {
  for (int d = 1; d <= 18; ++d) {
    const auto dtype = static_cast<DataType>(d);
    SCOPED_TRACE(DataTypeName(dtype));
    Tensor data;
    if (dtype == DataType::kString) {
      data =
          Tensor(std::vector<std::string>{"a", "", "ccc", std::string("\0x", 2), "e", "f"}, {2, 3});
    } else {
      const int64_t w = DataTypeWidth(dtype);
      std::string bytes(6 * w, '\0');
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t b = 0; b < w; ++b) {
          // BOOL must stay 0/1; others get distinct (finite) bit patterns.
          bytes[i * w + b] = dtype == DataType::kBool ? (b == 0 ? i % 2 : 0)
                                                      : static_cast<char>(0x10 * (i + 1) + b);
        }
      }
      data = Tensor::Copy(dtype, {2, 3}, bytes.data());
    }
    auto element = [&](const Tensor& t, int64_t i) {
      if (t.dtype() == DataType::kString) return std::string(t.strings()[i]);
      const int64_t w = DataTypeWidth(t.dtype());
      return std::string(t.bytes().data() + i * w, w);
    };
    auto expect_perm = [&](const absl::StatusOr<Tensor>& out, std::vector<int> perm) {
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->dtype(), dtype);
      EXPECT_THAT(out->shape(), ElementsAre(2, 3));
      for (int i = 0; i < 6; ++i) EXPECT_EQ(element(*out, i), element(data, perm[i])) << i;
    };
    expect_perm(client_->Reverse(data, Tensor(std::vector<int32_t>{1})), {2, 1, 0, 5, 4, 3});
    expect_perm(client_->Roll(data, Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(1)),
                {2, 0, 1, 5, 3, 4});
    expect_perm(client_->ReverseSequence(data, Tensor(std::vector<int32_t>{3, 2}), 0, 1),
                {2, 1, 0, 4, 3, 5});
    expect_perm(client_->OnnxReverseSequence(data, Tensor(std::vector<int64_t>{2, 1, 2}), 1, 0),
                {3, 1, 5, 0, 4, 2});
  }
}

TEST_F(ClientTest, TypedConstructionAndAccess) {
  // Narrow floats from float and from bits; read back widened.
  auto f16 = client_->Reverse(Tensor::FromFloats(DataType::kFloat16, {1.5f, -2, 65504}, {3}),
                              Tensor(std::vector<int64_t>{0}));
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_THAT(*f16->ToFloats(), ElementsAre(65504, -2, 1.5f));
  EXPECT_THAT(f16->values<uint16_t>(), ElementsAre(0x7bff, 0xc000, 0x3e00));
  auto e4m3 = client_->Reverse(
      Tensor::FromBits(DataType::kFloat8E4M3, std::vector<uint8_t>{0x7f, 0x38}, {2}),
      Tensor(std::vector<int64_t>{0}));
  ASSERT_TRUE(e4m3.ok()) << e4m3.status();
  EXPECT_EQ(e4m3->values<uint8_t>()[0], 0x38);
  EXPECT_EQ(e4m3->ToFloats()->at(0), 1.0f);
  EXPECT_TRUE(std::isnan(e4m3->ToFloats()->at(1)));
  // Complex, bool and a caller-owned view.
  auto c = client_->Reverse(Tensor(std::vector<std::complex<double>>{{1, 2}, {3, -4}}),
                            Tensor(std::vector<int64_t>{0}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->values<std::complex<double>>(),
              ElementsAre(std::complex<double>(3, -4), std::complex<double>(1, 2)));
  auto b = client_->Reverse(Tensor(std::vector<bool>{true, false, false}),
                            Tensor(std::vector<int64_t>{0}));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(*b->ToVector<bool>(), ElementsAre(false, false, true));
  EXPECT_FALSE(b->ToVector<int32_t>().ok());
  const double buf[4] = {1, 2, 3, 4};
  const Tensor view = Tensor::View(buf, {2, 2});
  EXPECT_TRUE(view.is_view());
  auto v = client_->Reverse(view, Tensor(std::vector<int64_t>{0, 1}));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(v->values<double>(), ElementsAre(4, 3, 2, 1));
}

TEST_F(ClientTest, ServerErrorsKeepCodeAndMessage) {
  auto out =
      client_->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(2));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Roll: axes[0] = 2 is out of range [-2, 1] for data of rank 2");
  // Its google.rpc.BadRequest: the request field (the SDK sends raw_data), the message.
  const ErrorDetails details = GetErrorDetails(out.status());
  ASSERT_EQ(details.field_violations.size(), 1u);
  EXPECT_EQ(details.field_violations[0].field, "inputs[2].raw_data");
  EXPECT_EQ(details.field_violations[0].description, out.status().message());
  EXPECT_THAT(details.type_urls, ElementsAre("type.googleapis.com/google.rpc.BadRequest"));
  EXPECT_FALSE(details.retry_delay.has_value());
  auto unknown = client_->Execute("Frobnicate", {}, {Tensor(k4x3, {4, 3})});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(unknown.status().message(), HasSubstr("Frobnicate"));
  auto bad_attr = client_->Execute("Reverse", {{"mode", "sideways"}},
                                   {Tensor(k4x3, {4, 3}), Tensor(std::vector<int64_t>{0})});
  EXPECT_EQ(bad_attr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_attr.status().message(), HasSubstr("sideways"));
}

// W3C trace context per call (issue 40): the caller's traceparent (or a new
// trace asked for, issue 46) goes out, the server's comes back with the same
// trace id, and so does its server-timing; unary, streamed and async alike.
TEST_F(ClientTest, TraceparentOutAndServerTraceBack) {
  constexpr char kParent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const ::testing::Matcher<std::string> kServerTraceparent =
      ::testing::MatchesRegex("00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01");
  const ::testing::Matcher<std::string> kTiming =
      ::testing::MatchesRegex("queue;dur=[0-9.]+, kernel;dur=[0-9.]+, total;dur=[0-9.]+");
  for (Transport transport : {Transport::kUnary, Transport::kStream}) {
    SCOPED_TRACE(static_cast<int>(transport));
    CallTrace trace;
    CallOptions call;
    call.transport = transport;
    call.traceparent = kParent;
    call.trace = &trace;
    auto out = client_->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1),
                             Tensor::Scalar<int64_t>(0), call);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(trace.traceparent, kParent);
    EXPECT_THAT(trace.server_traceparent, kServerTraceparent);
    EXPECT_NE(trace.server_traceparent.substr(36, 16), "00f067aa0ba902b7");
    if (transport == Transport::kUnary) {
      EXPECT_THAT(trace.server_timing, kTiming);
    } else {
      // A flowing stream (the SDK's default) runs its op piece by piece while
      // the data moves: no queue or kernel stage of its own, the whole call only.
      EXPECT_THAT(trace.server_timing, ::testing::MatchesRegex("total;dur=[0-9.]+"));
    }
  }
  // No traceparent given: nothing sent (the server's trace is its own; what
  // reached it: tests/client/sdk_trace_test.cc).
  CallTrace untraced;
  CallOptions call;
  call.trace = &untraced;
  ASSERT_TRUE(
      client_
          ->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0), call)
          .ok());
  EXPECT_EQ(untraced.traceparent, "");
  // A new trace asked for: one per call, which the server continues.
  CallTrace first, second;
  call.new_trace = true;
  call.trace = &first;
  ASSERT_TRUE(
      client_
          ->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0), call)
          .ok());
  call.trace = &second;
  auto bad = client_->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1),
                           Tensor::Scalar<int64_t>(7), call);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(first.traceparent, ::testing::MatchesRegex("00-[0-9a-f]{32}-[0-9a-f]{16}-01"));
  EXPECT_NE(first.traceparent.substr(3, 32), second.traceparent.substr(3, 32));
  EXPECT_EQ(first.server_traceparent.substr(3, 32), first.traceparent.substr(3, 32));
  // A failed call still says where its trace went.
  EXPECT_EQ(second.server_traceparent.substr(3, 32), second.traceparent.substr(3, 32));
  EXPECT_THAT(second.server_timing, ::testing::MatchesRegex("total;dur=[0-9.]+"));
  // Async: written before `done` runs.
  CallTrace async_trace;
  call.trace = &async_trace;
  call.traceparent = kParent;
  auto future = client_->ExecuteFuture(
      "Roll", {}, {Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)},
      call);
  ASSERT_TRUE(future.get().ok());
  EXPECT_THAT(async_trace.server_traceparent, kServerTraceparent);
  EXPECT_THAT(async_trace.server_timing, kTiming);
}

TEST_F(ClientTest, InvalidTensorRejectedBeforeSending) {
  auto out = client_->Reverse(Tensor(k4x3, {5, 3}), Tensor(std::vector<int64_t>{0}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "inputs[0]: 12 INT32 values for shape [5,3] of 15 elements");
  EXPECT_EQ(client_->Execute("Roll", {}, {Tensor()}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, TinyDeadlineOnLargeRequest) {
  std::vector<float> big(32 << 20);  // 128 MiB
  CallOptions call;
  call.deadline = std::chrono::milliseconds(1);
  auto out = client_->Reverse(Tensor::View(big.data(), {static_cast<int64_t>(big.size())}),
                              Tensor(std::vector<int64_t>{0}), ReverseMode::kIndex, call);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  // The client still works afterwards.
  EXPECT_TRUE(client_->ListOps().ok());
}

// Unary calls around the size from which inputs leave as their own slice and
// replies are read outside protobuf (client/unary_codec.h): owned tensors
// and Views, a View at an odd address, and a chain whose steps follow a big
// input in the request.
TEST_F(ClientTest, BigUnaryCallsAroundTheSliceThreshold) {
  CallOptions call;
  call.transport = Transport::kUnary;
  for (int64_t n : {int64_t{32767}, int64_t{32768}, (int64_t{1} << 20) + 3}) {
    std::vector<uint8_t> bytes(static_cast<size_t>(n) + 1);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
    const std::vector<uint8_t> data(bytes.begin() + 1, bytes.end());
    std::vector<uint8_t> rolled(data.size());  // Roll by 1 along axis 0
    for (size_t i = 0; i < data.size(); ++i) rolled[(i + 1) % data.size()] = data[i];
    // bytes.data() + 1: an odd address, the caller's own memory.
    for (const Tensor& t : {Tensor(data, {n}), Tensor::View(bytes.data() + 1, {n})}) {
      auto out =
          client_->Roll(t, Tensor(std::vector<int64_t>{1}), Tensor(std::vector<int64_t>{0}), call);
      ASSERT_TRUE(out.ok()) << n << ": " << out.status();
      EXPECT_THAT(out->shape(), ElementsAre(n));
      EXPECT_TRUE(std::vector<uint8_t>(out->values<uint8_t>().begin(),
                                       out->values<uint8_t>().end()) == rolled)
          << n;
      // The asynchronous call takes the same path.
      ExecuteResult async =
          client_
              ->ExecuteFuture("Roll", {},
                              {t, Tensor(std::vector<int64_t>{1}), Tensor(std::vector<int64_t>{0})})
              .get();
      ASSERT_TRUE(async.ok()) << n << ": " << async.status();
      ASSERT_EQ(async->size(), 1u);
      EXPECT_TRUE(std::vector<uint8_t>(async->front().values<uint8_t>().begin(),
                                       async->front().values<uint8_t>().end()) == rolled)
          << n;
    }
    // Reverse, then Roll by 1: out[0] = data[0], out[i] = data[n - i].
    auto chained = client_->Chain(Tensor(data, {n})).Reverse({0}).Roll({1}, {0}).Run(call);
    ASSERT_TRUE(chained.ok()) << chained.status();
    auto v = chained->values<uint8_t>();
    ASSERT_EQ(static_cast<int64_t>(v.size()), n);
    EXPECT_EQ(v[0], data[0]);
    EXPECT_EQ(v[1], data[n - 1]);
    EXPECT_EQ(v[n - 1], data[1]);
  }
}

TEST_F(ClientTest, ListOpsAndHealth) {
  auto ops = client_->ListOps();
  ASSERT_TRUE(ops.ok()) << ops.status();
  std::vector<std::string> names;
  for (const OpInfo& op : *ops) names.push_back(op.name);
  EXPECT_THAT(names, ElementsAre("Reverse", "ReverseSequence", "Roll", "onnx.ReverseSequence"));
  EXPECT_EQ((*ops)[2].inputs.size(), 3u);
  EXPECT_EQ(*client_->Health(), ServingStatus::kServing);
  EXPECT_EQ(*client_->Health("tensorops.v1.TensorOps"), ServingStatus::kServing);
}

TEST_F(ClientTest, AsyncPipelinedFromManyThreads) {
  constexpr int kThreads = 8, kCalls = 50;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::future<ExecuteResult>> futures;
      for (int i = 0; i < kCalls; ++i) {
        futures.push_back(
            client_->ExecuteFuture("Roll", {},
                                   {Tensor(std::vector<int32_t>{t, i, 7}),
                                    Tensor::Scalar<int64_t>(i), Tensor::Scalar<int64_t>(0)}));
      }
      for (int i = 0; i < kCalls; ++i) {
        ExecuteResult r = futures[i].get();
        if (!r.ok() || r->size() != 1) continue;
        std::vector<int32_t> in = {t, i, 7}, want(3);
        for (int k = 0; k < 3; ++k) want[(k + i) % 3] = in[k];
        if ((*r)[0].ToVector<int32_t>().value_or(std::vector<int32_t>()) == want) ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), kThreads * kCalls);

  // Callback form, outliving the Client.
  std::promise<ExecuteResult> done;
  client_->ExecuteAsync("Reverse", {{"mode", "index"}},
                        {Tensor(std::vector<int8_t>{1, 2}), Tensor(std::vector<int64_t>{0})},
                        [&done](ExecuteResult r) { done.set_value(std::move(r)); });
  client_.reset();
  ExecuteResult r = done.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT((*r)[0].values<int8_t>(), ElementsAre(2, 1));
}

TEST(ClientOptionsTest, RejectsBadOptions) {
  ClientOptions options;
  options.target = "";
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.target = "127.0.0.1:1";
  options.tls = TlsOptions{};
  options.tls->client_cert_chain = "x";
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Two servers behind one round_robin target.
class TwoServersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(servers_[i].Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0"}).ok());
      metrics_port_[i] = servers_[i].metrics_port();
      ASSERT_GT(metrics_port_[i], 0);
    }
    ClientOptions options;
    options.target =
        absl::StrCat("ipv4:127.0.0.1:", servers_[0].port(), ",127.0.0.1:", servers_[1].port());
    options.default_deadline = std::chrono::seconds(20);
    auto c = Client::Create(options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  double RollCount(int i) {
    auto body = testing::HttpGet(metrics_port_[i], "/metrics");
    if (!body.ok()) return -1;
    auto v = testing::FindSample(*body, "tensorops_requests_total",
                                 {{"method", "Execute"}, {"op", "Roll"}, {"code", "OK"}});
    return v.ok() ? *v : 0;
  }

  bool CallOnce() {
    auto out =
        client_->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0));
    return out.ok() && out->values<int32_t>()[0] == 10;
  }

  ServerProcess servers_[2];
  int metrics_port_[2] = {0, 0};
  std::unique_ptr<Client> client_;
};

TEST_F(TwoServersTest, RoundRobinReachesBoth) {
  // round_robin sends only to connected subchannels; while the second
  // connection is still coming up (slow under sanitizers) every call goes to
  // the first. Call in batches of 40 until both have served, at most 400.
  int calls = 0;
  double a = 0, b = 0;
  while (calls < 400 && (a == 0 || b == 0)) {
    for (int i = 0; i < 40; ++i, ++calls) ASSERT_TRUE(CallOnce()) << calls;
    a = RollCount(0);
    b = RollCount(1);
  }
  EXPECT_GT(a, 0);
  EXPECT_GT(b, 0);
  EXPECT_EQ(a + b, calls);
}

TEST_F(TwoServersTest, RetriesWhenOneServerStops) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(CallOnce()) << i;
  servers_[0].Stop();
  int ok = 0;
  for (int i = 0; i < 40; ++i) ok += CallOnce() ? 1 : 0;
  EXPECT_EQ(ok, 40);
  EXPECT_GE(RollCount(1), 40);
}

// A server's own refusal says when to come back (grpc-retry-pushback-ms,
// google.rpc.RetryInfo): the SDK's retries wait that long, not their backoff.
// The kernel gate keeps the queue full, so every attempt is refused.
class RefusalRetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(gate_.shut_ok());
    ASSERT_TRUE(
        server_
            .Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--threads=1", "--max_queue=1",
                                           "--inline_max_bytes=0", gate_.Flag()})
            .ok());
  }
  void TearDown() override { gate_.Open(); }

  std::unique_ptr<Client> NewClient(RetryPolicy retry) {
    ClientOptions options;
    options.target = server_.address();
    options.retry = retry;
    auto c = Client::Create(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  double Sample(const std::string& name, const std::map<std::string, std::string>& labels) {
    auto body = testing::HttpGet(server_.metrics_port(), "/metrics");
    if (!body.ok()) return -1;
    auto v = testing::FindSample(*body, name, labels);
    return v.ok() ? *v : 0;
  }

  bool WaitForGauge(const std::string& name, double want) {
    for (int i = 0; i < 400 && Sample(name, {}) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return Sample(name, {}) == want;
  }

  testing::KernelGate gate_;
  ServerProcess server_;
};

TEST_F(RefusalRetryTest, RetriesWaitForTheServersDelayNotTheBackoff) {
  RetryPolicy slow;  // a backoff far longer than the server's delay
  slow.max_attempts = 5;
  slow.initial_backoff = std::chrono::seconds(5);
  slow.max_backoff = std::chrono::seconds(5);
  auto holder = NewClient(RetryPolicy{});
  auto caller = NewClient(slow);
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(caller, nullptr);
  // One call held at the gate, one in the queue: the queue (1) is full.
  auto held = std::async(std::launch::async, [&] {
    return holder->Roll(Tensor(std::vector<int32_t>(1 << 16, 7), {256, 256}),
                        Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0));
  });
  ASSERT_TRUE(WaitForGauge("tensorops_inflight_requests", 1));
  auto queued = std::async(std::launch::async, [&] {
    return holder->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1),
                        Tensor::Scalar<int64_t>(0));
  });
  ASSERT_TRUE(WaitForGauge("tensorops_queue_depth", 1));

  const auto t0 = std::chrono::steady_clock::now();
  auto refused =
      caller->Roll(Tensor(k4x3, {4, 3}), Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  gate_.Open();
  EXPECT_TRUE(held.get().ok());
  EXPECT_TRUE(queued.get().ok());

  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("--max_queue=1"));
  // The details reach the caller as payloads keyed by their type URL.
  EXPECT_TRUE(refused.status().GetPayload("type.googleapis.com/google.rpc.RetryInfo").has_value());
  EXPECT_TRUE(refused.status().GetPayload("type.googleapis.com/google.rpc.ErrorInfo").has_value());
  // Five attempts, four waits of the server's 50 ms, not of the 5 s backoff.
  EXPECT_EQ(Sample("tensorops_rejected_requests_total", {{"limit", "queue"}}), 5);
  EXPECT_GE(ms, 4 * 50 * 0.9);
  EXPECT_LT(ms, 4000);
}

TEST_F(RefusalRetryTest, RequestOverALimitIsNotRetried) {
  gate_.Open();
  ServerProcess small;
  ASSERT_TRUE(
      small.Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--max_inflight_bytes=100000"}).ok());
  ClientOptions options;
  options.target = small.address();
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto out = (*client)->Roll(Tensor(std::vector<int32_t>(1 << 16, 7), {256, 256}),
                             Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  // Its google.rpc.ErrorInfo, as the SDK exposes it; no RetryInfo (no wait helps).
  const ErrorDetails details = GetErrorDetails(out.status());
  EXPECT_EQ(details.reason, "REQUEST_OVER_INFLIGHT_BUDGET");
  EXPECT_EQ(details.domain, "tensorops");
  EXPECT_EQ(details.metadata.count("flag"), 1u);
  EXPECT_FALSE(details.retry_delay.has_value());
  auto body = testing::HttpGet(small.metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok());
  auto rejected = testing::FindSample(*body, "tensorops_rejected_requests_total",
                                      {{"limit", "inflight_bytes"}});
  ASSERT_TRUE(rejected.ok());
  EXPECT_EQ(*rejected, 1);  // pushback -1: gRPC's retry policy stopped at once
}

}  // namespace
}  // namespace tensorops
