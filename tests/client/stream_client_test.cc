// The SDK's streamed calls (ExecuteStream) against a real server: the same
// answers as Execute for every op and type, the automatic switch at
// stream_threshold_bytes, progress reports, tensors past the server's
// message limit, and errors.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::HasSubstr;

double Calls(const ServerProcess& server, const std::string& method, const std::string& op) {
  return testing::ScrapeSample(server.metrics_port(), "tensorops_requests_total",
                               {{"method", method}, {"op", op}, {"code", "OK"}});
}

// Deterministic bytes for a tensor of `n` bytes.
std::vector<uint8_t> Pattern(int64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

class StreamClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess;
    // Small messages and tensors for Execute, so the streamed path is the
    // only way past them.
    ASSERT_TRUE(server_
                    ->Start(TENSOROPS_SERVER_PATH,
                            {"--metrics_port=0", "--max_message_bytes=4194304",
                             "--max_tensor_bytes=2097152", "--stream_chunk_bytes=262144"})
                    .ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  std::unique_ptr<Client> MakeClient(int64_t threshold, int64_t chunk = 65536) {
    ClientOptions options;
    options.target = server_->address();
    options.stream_threshold_bytes = threshold;
    options.stream_chunk_bytes = chunk;
    auto c = Client::Create(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  static ServerProcess* server_;
};
ServerProcess* StreamClientTest::server_ = nullptr;

TEST_F(StreamClientTest, EveryOpAndTypeStreamedEqualsExecute) {
  auto client = MakeClient(int64_t{1} << 40, 5);  // 5-byte chunks split every element
  ASSERT_NE(client, nullptr);
  const std::vector<DataType> types = {
      DataType::kFloat32,   DataType::kFloat64,   DataType::kFloat16,    DataType::kBFloat16,
      DataType::kInt8,      DataType::kInt16,     DataType::kInt32,      DataType::kInt64,
      DataType::kUInt8,     DataType::kUInt16,    DataType::kUInt32,     DataType::kUInt64,
      DataType::kBool,      DataType::kComplex64, DataType::kComplex128, DataType::kFloat8E4M3,
      DataType::kFloat8E5M2};
  CallOptions stream;
  stream.transport = Transport::kStream;
  CallOptions unary;
  unary.transport = Transport::kUnary;
  int calls = 0;
  for (DataType t : types) {
    SCOPED_TRACE(DataTypeName(t));
    const std::vector<int64_t> shape = {3, 4, 5};
    std::vector<uint8_t> bytes = Pattern(60 * DataTypeWidth(t), static_cast<uint32_t>(t));
    if (t == DataType::kBool) {
      for (auto& b : bytes) b &= 1;
    }
    const Tensor data = Tensor::Copy(t, shape, bytes.data());
    struct OpCall {
      std::string op;
      Attrs attrs;
      std::vector<Tensor> inputs;
    };
    const std::vector<OpCall> ops = {
        {"Reverse", {{"mode", "index"}}, {data, Tensor(std::vector<int64_t>{0, 2})}},
        {"Reverse", {{"mode", "mask"}}, {data, Tensor(std::vector<bool>{false, true, true})}},
        {"Roll",
         {},
         {data, Tensor(std::vector<int64_t>{2, -7}), Tensor(std::vector<int64_t>{2, 0})}},
        {"ReverseSequence",
         {{"batch_axis", 2}, {"seq_axis", 1}},
         {data, Tensor(std::vector<int32_t>{4, 0, 1, 3, 2})}},
        {"onnx.ReverseSequence",
         {{"batch_axis", 0}, {"time_axis", 1}},
         {data, Tensor(std::vector<int64_t>{4, 1, 3})}},
    };
    for (const OpCall& c : ops) {
      SCOPED_TRACE(c.op);
      ExecuteResult a = client->Execute(c.op, c.attrs, c.inputs, stream);
      ExecuteResult b = client->Execute(c.op, c.attrs, c.inputs, unary);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(a->size(), 1u);
      EXPECT_EQ(a->front(), b->front());
      EXPECT_NE(a->front(), data) << "the op changed nothing: a useless case";
      ++calls;
    }
  }
  EXPECT_EQ(Calls(*server_, "ExecuteStream", "Reverse") + Calls(*server_, "ExecuteStream", "Roll") +
                Calls(*server_, "ExecuteStream", "ReverseSequence") +
                Calls(*server_, "ExecuteStream", "onnx.ReverseSequence"),
            calls);
}

TEST_F(StreamClientTest, SwitchesAtTheThresholdAndReportsProgress) {
  auto client = MakeClient(int64_t{1} << 20);
  ASSERT_NE(client, nullptr);
  const double stream_before = Calls(*server_, "ExecuteStream", "Roll");
  const double unary_before = Calls(*server_, "Execute", "Roll");

  // Below the threshold: one Execute message, no progress reports.
  std::vector<int32_t> small(1000);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<int32_t>(i);
  int reports = 0;
  CallOptions call;
  call.progress = [&](const TransferProgress&) { ++reports; };
  auto r = client->Roll(Tensor(small, {1000}), Tensor(std::vector<int64_t>{1}),
                        Tensor(std::vector<int64_t>{0}), call);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->values<int32_t>()[1], 0);
  EXPECT_EQ(reports, 0);
  EXPECT_EQ(Calls(*server_, "Execute", "Roll"), unary_before + 1);

  // 8 MiB: past the server's 4 MiB messages and 2 MiB tensors, streamed.
  const int64_t n = int64_t{2} << 20;
  std::vector<int32_t> big(n);
  for (int64_t i = 0; i < n; ++i) big[i] = static_cast<int32_t>(i * 3);
  std::vector<TransferProgress> seen;
  call.progress = [&](const TransferProgress& p) { seen.push_back(p); };
  call.flow = false;  // in order, one report per chunk each way (the flowing case below)
  r = client->Roll(Tensor::View(big.data(), {n}), Tensor(std::vector<int64_t>{-5}),
                   Tensor(std::vector<int64_t>{0}), call);
  ASSERT_TRUE(r.ok()) << r.status();
  auto out = r->values<int32_t>();
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 9973) EXPECT_EQ(out[i], big[(i + 5) % n]) << i;
  EXPECT_EQ(out[n - 1], big[4]);
  EXPECT_EQ(Calls(*server_, "ExecuteStream", "Roll"), stream_before + 1);

  const int64_t total = n * 4 + 16;
  // One report per chunk: 64 KiB up (the client's chunks), 256 KiB down
  // (the server's --stream_chunk_bytes), plus the two small inputs.
  EXPECT_EQ(seen.size(), static_cast<size_t>(n * 4 / 65536 + n * 4 / 262144 + 2));
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_sent, seen[i - 1].bytes_sent);
    EXPECT_GE(seen[i].bytes_received, seen[i - 1].bytes_received);
  }
  EXPECT_EQ(seen.front().bytes_to_send, total);
  EXPECT_EQ(seen.front().bytes_to_receive, 0);  // nothing known of the output yet
  // ... but the op's output inference knows it from the start.
  EXPECT_EQ(seen.front().expected_bytes_to_receive, n * 4);
  EXPECT_EQ(seen.back().bytes_sent, total);
  EXPECT_EQ(seen.back().bytes_received, n * 4);
  EXPECT_EQ(seen.back().bytes_to_receive, n * 4);

  // Flowing (the default): reports on the calling thread as chunks go out
  // and come back, several arrivals per report at times; the same totals.
  const std::thread::id caller = std::this_thread::get_id();
  seen.clear();
  call.flow = true;
  call.progress = [&](const TransferProgress& p) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    seen.push_back(p);
  };
  r = client->Roll(Tensor::View(big.data(), {n}), Tensor(std::vector<int64_t>{-5}),
                   Tensor(std::vector<int64_t>{0}), call);
  ASSERT_TRUE(r.ok()) << r.status();
  out = r->values<int32_t>();
  for (int64_t i = 0; i < n; i += 9973) EXPECT_EQ(out[i], big[(i + 5) % n]) << i;
  EXPECT_GE(seen.size(), static_cast<size_t>(n * 4 / 65536 + 2));
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_sent, seen[i - 1].bytes_sent);
    EXPECT_GE(seen[i].bytes_received, seen[i - 1].bytes_received);
  }
  EXPECT_EQ(seen.back().bytes_sent, total);
  EXPECT_EQ(seen.back().bytes_received, n * 4);
  EXPECT_EQ(seen.back().bytes_to_receive, n * 4);

  // The same tensor as one Execute message is refused by the server.
  call.transport = Transport::kUnary;
  r = client->Roll(Tensor::View(big.data(), {n}), Tensor(std::vector<int64_t>{-5}),
                   Tensor(std::vector<int64_t>{0}), call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
}

TEST_F(StreamClientTest, ASourceFlowsIntoASinkWithoutEitherHoldingTheTensor) {
  auto client = MakeClient(0);
  ASSERT_NE(client, nullptr);
  // 6 MiB of UINT8 [6144, 1024], made by the source as it is read, rolled by
  // 7 rows; the sink keeps what arrives by offset, and the test checks it
  // against Execute's answer (in pieces: 2 MiB tensors at most).
  const int64_t rows = 6144, cols = 1024, bytes = rows * cols;
  const std::vector<uint8_t> data = Pattern(bytes, 9);
  int reads = 0;
  std::unique_ptr<StreamSource> source =
      CallbackSource(DataType::kUInt8, {rows, cols}, [&](int64_t offset, int64_t n, char* out) {
        ++reads;
        std::memcpy(out, data.data() + offset, static_cast<size_t>(n));
        return absl::OkStatus();
      });
  std::string received(static_cast<size_t>(bytes), '\0');
  int64_t written = 0;
  bool discarded = false;
  std::unique_ptr<StreamSink> sink = CallbackSink(
      [&](int64_t offset, absl::string_view piece) {
        received.replace(static_cast<size_t>(offset), piece.size(), piece.data(), piece.size());
        written += static_cast<int64_t>(piece.size());
        return absl::OkStatus();
      },
      [&] { discarded = true; });
  absl::Status s = client->ExecuteStreamed(
      "Roll", {}, source.get(), {Tensor(std::vector<int64_t>{7}), Tensor(std::vector<int64_t>{0})},
      {}, sink.get());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(discarded);
  EXPECT_EQ(written, bytes);
  EXPECT_EQ(reads, 2 * bytes / 65536);  // once for the header's CRC-32, once to send
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(std::memcmp(received.data() + ((r + 7) % rows) * cols, data.data() + r * cols, cols),
              0)
        << "row " << r;
  }

  // A source that gives other bytes the second time: the server's CRC
  // check fails after output went out (DATA_LOSS), and the sink discards it.
  int pass = 0;
  std::unique_ptr<StreamSource> fickle =
      CallbackSource(DataType::kUInt8, {rows, cols}, [&](int64_t offset, int64_t n, char* out) {
        if (offset == 0) ++pass;
        std::memcpy(out, data.data() + offset, static_cast<size_t>(n));
        if (pass == 2 && offset == bytes / 2) out[0] ^= 1;
        return absl::OkStatus();
      });
  written = 0;
  s = client->ExecuteStreamed("Roll", {}, fickle.get(),
                              {Tensor(std::vector<int64_t>{7}), Tensor(std::vector<int64_t>{0})},
                              {}, sink.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("void"));
  EXPECT_GT(written, 0);  // flowing: output came before the end
  EXPECT_TRUE(discarded);
}

TEST_F(StreamClientTest, FileSourceAndFileSink) {
  auto client = MakeClient(0);
  ASSERT_NE(client, nullptr);
  const std::string dir = ::testing::TempDir();
  const std::string in_path = dir + "/flow_in.bin", out_path = dir + "/flow_out.bin";
  const int64_t n = 1 << 20;  // INT32 [1 Mi]: 4 MiB behind a 3-byte prefix
  const std::vector<uint8_t> data = Pattern(n * 4, 3);
  {
    std::FILE* f = std::fopen(in_path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite("abc", 1, 3, f);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
  }
  auto source = FileSource(in_path, 3, DataType::kInt32, {n});
  ASSERT_TRUE(source.ok()) << source.status();
  std::unique_ptr<StreamSink> sink =
      FileSink(out_path, [](DataType, const std::vector<int64_t>&) { return std::string("HDR"); });
  absl::Status s = client->ExecuteStreamed("Reverse", {{"mode", "index"}}, source->get(),
                                           {Tensor(std::vector<int64_t>{0})}, {}, sink.get());
  ASSERT_TRUE(s.ok()) << s;
  std::FILE* f = std::fopen(out_path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string got(3 + n * 4, '\0');
  EXPECT_EQ(std::fread(got.data(), 1, got.size() + 1, f), got.size());
  std::fclose(f);
  EXPECT_EQ(got.substr(0, 3), "HDR");
  for (int64_t i = 0; i < n; i += 997) {
    ASSERT_EQ(std::memcmp(got.data() + 3 + i * 4, data.data() + (n - 1 - i) * 4, 4), 0) << i;
  }
}

TEST_F(StreamClientTest, StringInputsAreNeverStreamedAutomatically) {
  auto client = MakeClient(0);
  ASSERT_NE(client, nullptr);
  const Tensor words(std::vector<std::string>{"a", "bb", "ccc"}, {3});
  auto r = client->Reverse(words, Tensor(std::vector<int64_t>{0}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->strings(), ::testing::ElementsAre("ccc", "bb", "a"));
  CallOptions call;
  call.transport = Transport::kStream;
  r = client->Reverse(words, Tensor(std::vector<int64_t>{0}), ReverseMode::kIndex, call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("STRING, which cannot be streamed"));
}

TEST_F(StreamClientTest, ErrorsKeepTheirCodeAndMessage) {
  auto client = MakeClient(0);
  ASSERT_NE(client, nullptr);
  const Tensor data(std::vector<float>(24, 1.5f), {2, 3, 4});
  auto r = client->Roll(data, Tensor(std::vector<int64_t>{1}), Tensor(std::vector<int64_t>{3}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("Roll: axes"));
  auto e = client->Execute("NoSuchOp", {}, {data});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented);
  // An invalid tensor is refused before anything is sent.
  e = client->Execute("Roll", {}, {Tensor::View(DataType::kInt32, {-1}, nullptr)});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamClientTest, TinyDeadlineOnAStreamedCall) {
  auto client = MakeClient(0);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> big(int64_t{64} << 20, 7);
  CallOptions call;
  call.deadline = std::chrono::milliseconds(1);
  auto r = client->Reverse(Tensor::View(big.data(), {static_cast<int64_t>(big.size())}),
                           Tensor(std::vector<int64_t>{0}), ReverseMode::kIndex, call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  // Nothing stays in flight on the server.
  bool idle = false;
  for (int i = 0; i < 1000 && !idle; ++i) {
    idle = testing::ScrapeSample(server_->metrics_port(), "tensorops_inflight_bytes", {}) == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(idle);
}

TEST(StreamClientOptionsTest, RejectsBadStreamOptions) {
  ClientOptions options;
  options.stream_threshold_bytes = -1;
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.stream_threshold_bytes = 0;
  options.stream_chunk_bytes = 0;
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.stream_chunk_bytes = options.max_send_message_bytes;
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tensorops
