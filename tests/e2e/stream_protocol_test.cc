// ExecuteStream on the wire, against the real server: every rule of the
// protocol (proto/tensorops/v1/tensorops.proto, docs/server.md "Big tensors") with
// hand-built message sequences, including broken ones the SDK never sends,
// and what happens to memory when a stream breaks.
#include <grpcpp/grpcpp.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"
#include "tests/sanitizers.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>;

uint32_t Crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

v1::ExecuteStreamRequest Header(
    const std::string& op, const std::vector<std::pair<v1::DataType, std::vector<int64_t>>>& ins,
    const std::vector<std::string>& data) {
  v1::ExecuteStreamRequest m;
  v1::StreamHeader* h = m.mutable_header();
  h->set_op(op);
  for (size_t i = 0; i < ins.size(); ++i) {
    v1::TensorHeader* t = h->add_inputs();
    t->set_dtype(ins[i].first);
    for (int64_t d : ins[i].second) t->add_shape(d);
    t->set_crc32(i < data.size() ? Crc(data[i]) : 0);
  }
  return m;
}

v1::ExecuteStreamRequest Chunk(uint32_t tensor, uint64_t offset, const std::string& data) {
  v1::ExecuteStreamRequest m;
  m.mutable_chunk()->set_tensor(tensor);
  m.mutable_chunk()->set_offset(offset);
  m.mutable_chunk()->set_data(data);
  return m;
}

// A finished call: status plus the reassembled output (and its header).
struct Result {
  grpc::Status status;
  v1::StreamOutputHeader header;
  std::string output;
  int chunks = 0;
};

// Sends `messages` (stopping at the first failed write), closes, reads all.
Result Call(v1::TensorOps::Stub* stub, const std::vector<v1::ExecuteStreamRequest>& messages,
            bool close = true) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::unique_ptr<Stream> stream = stub->ExecuteStream(&ctx);
  for (const auto& m : messages) {
    if (!stream->Write(m)) break;
  }
  if (close) stream->WritesDone();
  Result r;
  v1::ExecuteStreamResponse resp;
  while (stream->Read(&resp)) {
    if (resp.has_header()) {
      r.header = resp.header();
    } else {
      EXPECT_EQ(resp.chunk().tensor(), 0u);
      EXPECT_EQ(resp.chunk().offset(), r.output.size());
      r.output += resp.chunk().data();
      ++r.chunks;
    }
  }
  r.status = stream->Finish();
  return r;
}

// Splits `data` of input `tensor` into chunks of `size` bytes.
void AddChunks(std::vector<v1::ExecuteStreamRequest>* out, uint32_t tensor, const std::string& data,
               size_t size) {
  for (size_t off = 0; off < data.size(); off += size) {
    out->push_back(Chunk(tensor, off, data.substr(off, size)));
  }
}

// Polls `cond` every 10 ms for up to 10 s (the server sees a client's cancel
// or a header a moment after the client sends it); true once it holds.
bool Eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 1000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::unique_ptr<v1::TensorOps::Stub> StubOf(const ServerProcess& server) {
  return v1::TensorOps::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
}

double InflightBytes(int metrics_port) {
  return testing::ScrapeSample(metrics_port, "tensorops_inflight_bytes", {});
}
double InflightRequests(int metrics_port) {
  return testing::ScrapeSample(metrics_port, "tensorops_inflight_requests", {});
}

class StreamProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess;
    ASSERT_TRUE(
        server_
            ->Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--stream_chunk_bytes=65536",
                                            "--threads=2", "--max_stream_bytes=1073741824",
                                            // Freed buffers go back to the OS soon
                                            // (CancelledStreamFreesItsMemory's RSS).
                                            "--buffer_cache_idle=200ms"})
            .ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = StubOf(*server_);
  }

  // Roll of int32 [rows, 3] by shift 1 on axis 0, with its inputs as bytes.
  struct RollCall {
    std::string data, shift, axes;
    std::vector<std::pair<v1::DataType, std::vector<int64_t>>> headers;
    std::vector<int32_t> expected;
  };
  static RollCall MakeRoll(int64_t rows) {
    RollCall c;
    std::vector<int32_t> v(rows * 3);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7 + 1);
    c.data = Bytes(v);
    c.shift = Bytes(std::vector<int64_t>{1});
    c.axes = Bytes(std::vector<int64_t>{0});
    c.headers = {
        {v1::DATA_TYPE_INT32, {rows, 3}}, {v1::DATA_TYPE_INT64, {1}}, {v1::DATA_TYPE_INT64, {1}}};
    c.expected.resize(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < 3; ++k) c.expected[((r + 1) % rows) * 3 + k] = v[r * 3 + k];
    }
    return c;
  }
  std::vector<v1::ExecuteStreamRequest> Messages(const RollCall& c, size_t chunk = 65536) {
    std::vector<v1::ExecuteStreamRequest> m = {
        Header("Roll", c.headers, {c.data, c.shift, c.axes})};
    AddChunks(&m, 0, c.data, chunk);
    AddChunks(&m, 1, c.shift, chunk);
    AddChunks(&m, 2, c.axes, chunk);
    return m;
  }

  static ServerProcess* server_;
  std::unique_ptr<v1::TensorOps::Stub> stub_;
};
ServerProcess* StreamProtocolTest::server_ = nullptr;

TEST_F(StreamProtocolTest, RollInManyChunksComesBackInChunksWithItsCrc) {
  const RollCall c = MakeRoll(100000);  // 1.2 MB: ~19 chunks of 64 KiB each way
  Result r = Call(stub_.get(), Messages(c));
  ASSERT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
  ASSERT_EQ(r.header.outputs_size(), 1);
  EXPECT_EQ(r.header.outputs(0).dtype(), v1::DATA_TYPE_INT32);
  EXPECT_THAT(r.header.outputs(0).shape(), ::testing::ElementsAre(100000, 3));
  EXPECT_EQ(r.header.outputs(0).crc32(), Crc(r.output));
  EXPECT_EQ(r.output, Bytes(c.expected));
  EXPECT_EQ(r.chunks, static_cast<int>((c.data.size() + 65535) / 65536));
}

TEST_F(StreamProtocolTest, ChunksOfDifferentInputsMayInterleaveAndSplitElements) {
  const RollCall c = MakeRoll(1000);
  std::vector<v1::ExecuteStreamRequest> m = {Header("Roll", c.headers, {c.data, c.shift, c.axes})};
  // 7-byte chunks split int32 elements; the small inputs go in between.
  for (size_t off = 0; off < c.data.size(); off += 7) {
    m.push_back(Chunk(0, off, c.data.substr(off, 7)));
    if (off == 70) AddChunks(&m, 2, c.axes, 3);
    if (off == 700) AddChunks(&m, 1, c.shift, 8);
  }
  Result r = Call(stub_.get(), m);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.output, Bytes(c.expected));
}

TEST_F(StreamProtocolTest, EmptyTensorsNeedNoChunks) {
  v1::ExecuteStreamRequest h =
      Header("Reverse", {{v1::DATA_TYPE_FLOAT32, {0, 4}}, {v1::DATA_TYPE_INT64, {0}}}, {});
  (*h.mutable_header()->mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
  Result r = Call(stub_.get(), {h});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.header.outputs_size(), 1);
  EXPECT_THAT(r.header.outputs(0).shape(), ::testing::ElementsAre(0, 4));
  EXPECT_EQ(r.header.outputs(0).crc32(), 0u);
  EXPECT_EQ(r.chunks, 0);
}

TEST_F(StreamProtocolTest, TruncatedStreamNamesTheInputAndTheBytes) {
  const RollCall c = MakeRoll(10000);
  std::vector<v1::ExecuteStreamRequest> m = Messages(c, 4096);
  m.erase(m.begin() + 5, m.begin() + 10);  // data stops after 4 chunks
  // Keep the small inputs (after the data chunks) so only data is short.
  std::vector<v1::ExecuteStreamRequest> head(m.begin(), m.begin() + 5);
  head.push_back(m[m.size() - 2]);
  head.push_back(m.back());
  Result r = Call(stub_.get(), head);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("stream ended after 16384 of 120000 bytes of inputs[0] ('data')"));
}

TEST_F(StreamProtocolTest, CorruptedChunkIsDataLoss) {
  const RollCall c = MakeRoll(10000);
  std::vector<v1::ExecuteStreamRequest> m = Messages(c, 4096);
  (*m[3].mutable_chunk()->mutable_data())[100] ^= 0x10;  // one bit flipped in transit
  Result r = Call(stub_.get(), m);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(r.status.error_message(), HasSubstr("inputs[0] ('data') is corrupt"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("CRC-32"));
}

TEST_F(StreamProtocolTest, ChunksOutOfPlaceAreRejected) {
  const RollCall c = MakeRoll(10000);
  {
    SCOPED_TRACE("gap");
    std::vector<v1::ExecuteStreamRequest> m = Messages(c, 4096);
    m.erase(m.begin() + 2);
    Result r = Call(stub_.get(), m);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(),
                HasSubstr("chunk for inputs[0] ('data') at offset 8192, expected offset 4096"));
  }
  {
    SCOPED_TRACE("repeat");
    std::vector<v1::ExecuteStreamRequest> m = Messages(c, 4096);
    m.insert(m.begin() + 2, m[1]);
    Result r = Call(stub_.get(), m);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(), HasSubstr("at offset 0, expected offset 4096"));
  }
  {
    SCOPED_TRACE("past the end");
    std::vector<v1::ExecuteStreamRequest> m = Messages(c, 4096);
    m.push_back(Chunk(1, 8, std::string(8, '\0')));
    Result r = Call(stub_.get(), m);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(
        r.status.error_message(),
        HasSubstr("chunk for inputs[1] ('shift') runs past its end: offset 8 + 8 bytes > 8"));
  }
  {
    SCOPED_TRACE("unknown tensor");
    Result r = Call(stub_.get(),
                    {Header("Roll", c.headers, {c.data, c.shift, c.axes}), Chunk(3, 0, "abcd")});
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(),
                HasSubstr("chunk.tensor is 3 but the header has 3 inputs"));
  }
  {
    SCOPED_TRACE("empty chunk");
    Result r =
        Call(stub_.get(), {Header("Roll", c.headers, {c.data, c.shift, c.axes}), Chunk(0, 0, "")});
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(), HasSubstr("empty chunk for inputs[0]"));
  }
  {
    SCOPED_TRACE("oversize chunk");
    Result r = Call(stub_.get(), {Header("Roll", c.headers, {c.data, c.shift, c.axes}),
                                  Chunk(0, 0, c.data.substr(0, 65537))});
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(),
                HasSubstr("chunk of 65537 bytes for inputs[0] ('data') exceeds the limit of 65536 "
                          "bytes (--stream_chunk_bytes)"));
  }
}

TEST_F(StreamProtocolTest, HeaderRules) {
  const RollCall c = MakeRoll(10);
  struct Case {
    std::string name;
    std::vector<v1::ExecuteStreamRequest> messages;
    grpc::StatusCode code;
    std::string message;
  };
  auto with = [&](auto edit) {
    v1::ExecuteStreamRequest h = Header("Roll", c.headers, {c.data, c.shift, c.axes});
    edit(h.mutable_header());
    return std::vector<v1::ExecuteStreamRequest>{h};
  };
  const std::vector<Case> cases = {
      {"chunk first",
       {Chunk(0, 0, "abcd")},
       grpc::StatusCode::INVALID_ARGUMENT,
       "the first ExecuteStream message must be a header"},
      {"nothing at all", {}, grpc::StatusCode::INVALID_ARGUMENT, "ended before its header"},
      {"two headers",
       {Header("Roll", c.headers, {}), Header("Roll", c.headers, {})},
       grpc::StatusCode::INVALID_ARGUMENT,
       "a second header"},
      {"unknown op", with([](v1::StreamHeader* h) { h->set_op("Transpose"); }),
       grpc::StatusCode::UNIMPLEMENTED, "unknown op \"Transpose\""},
      {"STRING",
       with([](v1::StreamHeader* h) { h->mutable_inputs(0)->set_dtype(v1::DATA_TYPE_STRING); }),
       grpc::StatusCode::INVALID_ARGUMENT, "header.inputs[0].dtype is STRING"},
      {"no dtype", with([](v1::StreamHeader* h) { h->mutable_inputs(1)->clear_dtype(); }),
       grpc::StatusCode::INVALID_ARGUMENT, "header.inputs[1].dtype is 0"},
      {"negative dim", with([](v1::StreamHeader* h) { h->mutable_inputs(0)->set_shape(0, -2); }),
       grpc::StatusCode::INVALID_ARGUMENT, "header.inputs[0].shape"},
      {"too few inputs", with([](v1::StreamHeader* h) { h->mutable_inputs()->RemoveLast(); }),
       grpc::StatusCode::INVALID_ARGUMENT, "Roll: expects 3 inputs"},
      {"wrong type for shift",
       with([](v1::StreamHeader* h) { h->mutable_inputs(1)->set_dtype(v1::DATA_TYPE_FLOAT32); }),
       grpc::StatusCode::INVALID_ARGUMENT, "input 'shift' (inputs[1]) has type FLOAT32"},
      {"unknown attribute", with([](v1::StreamHeader* h) {
         (*h->mutable_attrs()->mutable_fields())["bogus"].set_number_value(1);
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "unknown attribute \"bogus\""},
      {"rank past --max_rank", with([](v1::StreamHeader* h) {
         for (int i = 0; i < 40; ++i) h->mutable_inputs(0)->add_shape(1);
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "the limit is 32 (--max_rank)"},
      {"past --max_stream_bytes",
       with([](v1::StreamHeader* h) { h->mutable_inputs(0)->set_shape(0, int64_t{1} << 28); }),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "(--max_stream_bytes)"},
      {"shape overflows int64", with([](v1::StreamHeader* h) {
         h->mutable_inputs(0)->set_shape(0, int64_t{1} << 62);
         h->mutable_inputs(0)->set_shape(1, 16);
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "header.inputs[0].shape"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Result r = Call(stub_.get(), k.messages);
    EXPECT_EQ(r.status.error_code(), k.code) << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr(k.message));
  }
}

TEST_F(StreamProtocolTest, BoolBytesMustBeZeroOrOneAsInExecute) {
  const std::string data = Bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
  const std::string mask("\x01\x02", 2);
  v1::ExecuteStreamRequest h =
      Header("Reverse", {{v1::DATA_TYPE_FLOAT32, {2, 3}}, {v1::DATA_TYPE_BOOL, {2}}}, {data, mask});
  (*h.mutable_header()->mutable_attrs()->mutable_fields())["mode"].set_string_value("mask");
  Result r = Call(stub_.get(), {h, Chunk(0, 0, data), Chunk(1, 0, mask)});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("inputs[1] ('axis') byte 1 = 2 is not a valid BOOL (0 or 1)"));
}

TEST_F(StreamProtocolTest, OpErrorsAfterTheUploadAreTheOpsOwn) {
  RollCall c = MakeRoll(10);
  c.axes = Bytes(std::vector<int64_t>{5});  // out of range for rank 2
  Result r = Call(stub_.get(), Messages(c));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("Roll: axes"));
}

TEST_F(StreamProtocolTest, MetricsCountStreamedCallsAndBytes) {
  const double ok_before =
      testing::ScrapeSample(server_->metrics_port(), "tensorops_requests_total",
                            {{"method", "ExecuteStream"}, {"op", "Roll"}, {"code", "OK"}});
  const double in_before =
      testing::ScrapeSample(server_->metrics_port(), "tensorops_stream_bytes_total",
                            {{"op", "Roll"}, {"direction", "received"}});
  const double out_before =
      testing::ScrapeSample(server_->metrics_port(), "tensorops_stream_bytes_total",
                            {{"op", "Roll"}, {"direction", "sent"}});
  ASSERT_GE(ok_before, 0);
  const RollCall c = MakeRoll(5000);
  Result r = Call(stub_.get(), Messages(c));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_requests_total",
                                  {{"method", "ExecuteStream"}, {"op", "Roll"}, {"code", "OK"}}),
            ok_before + 1);
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_stream_bytes_total",
                                  {{"op", "Roll"}, {"direction", "received"}}),
            in_before + c.data.size() + 16);
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_stream_bytes_total",
                                  {{"op", "Roll"}, {"direction", "sent"}}),
            out_before + c.data.size());
}

// A client that goes away mid-upload: the call ends, its bytes go back to
// admission control, and the server's memory returns to where it was.
TEST_F(StreamProtocolTest, CancelledStreamFreesItsMemory) {
  const int64_t rows = int64_t{256} << 20 >> 2;  // 256 MiB of FLOAT32 ([rows, 1])
  const std::string piece(65536, 'x');
  const int64_t baseline_kib = server_->StatusKiB("VmRSS:");
  ASSERT_GT(baseline_kib, 0);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream = stub_->ExecuteStream(&ctx);
    v1::ExecuteStreamRequest h;
    h.mutable_header()->set_op("Reverse");
    v1::TensorHeader* d = h.mutable_header()->add_inputs();
    d->set_dtype(v1::DATA_TYPE_FLOAT32);
    d->add_shape(rows);
    d->add_shape(1);
    v1::TensorHeader* a = h.mutable_header()->add_inputs();
    a->set_dtype(v1::DATA_TYPE_INT64);
    a->add_shape(0);
    ASSERT_TRUE(stream->Write(h));
    int64_t sent = 0;
    for (; sent < (int64_t{200} << 20); sent += piece.size()) {  // 200 of 256 MiB
      ASSERT_TRUE(stream->Write(Chunk(0, sent, piece)));
    }
    // The server holds the upload: in flight and in bytes.
    EXPECT_EQ(InflightRequests(server_->metrics_port()), 1);
    EXPECT_EQ(InflightBytes(server_->metrics_port()), 2.0 * rows * 4);
    ctx.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
    const bool released = Eventually([&] {
      return InflightRequests(server_->metrics_port()) == 0 &&
             InflightBytes(server_->metrics_port()) == 0;
    });
    EXPECT_TRUE(released);
    // The input went to the buffer cache, which returns it to the OS after
    // --buffer_cache_idle (200 ms here).
    int64_t rss = 0;
    for (int i = 0; i < 300; ++i) {
      rss = server_->StatusKiB("VmRSS:");
      if (rss < baseline_kib + 64 * 1024) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Sanitizers keep freed memory (quarantine, shadow): RSS says nothing there.
    if (testing::kSanitized) continue;
    EXPECT_LT(rss, baseline_kib + 64 * 1024) << "RSS " << rss << " KiB, baseline " << baseline_kib;
  }
  EXPECT_GE(testing::ScrapeSample(
                server_->metrics_port(), "tensorops_requests_total",
                {{"method", "ExecuteStream"}, {"op", "Reverse"}, {"code", "CANCELLED"}}),
            3);
  // The server still serves.
  const RollCall c = MakeRoll(100);
  EXPECT_TRUE(Call(stub_.get(), Messages(c)).status.ok());
}

// A client that sends a header and then nothing holds its budget only until
// --max_connection_age + --max_connection_age_grace close its connection.
TEST(StreamStallTest, StalledUploadEndsWithTheConnectionAge) {
  ServerProcess server;
  ASSERT_TRUE(server
                  .Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--max_connection_age=1s",
                                                 "--max_connection_age_grace=1s"})
                  .ok());
  auto stub = StubOf(server);
  grpc::ClientContext ctx;  // no deadline: only the server can end it
  std::unique_ptr<Stream> stream = stub->ExecuteStream(&ctx);
  ASSERT_TRUE(stream->Write(
      Header("Reverse", {{v1::DATA_TYPE_UINT8, {1 << 20}}, {v1::DATA_TYPE_INT64, {0}}}, {})));
  const auto start = Clock::now();
  v1::ExecuteStreamResponse resp;
  EXPECT_FALSE(stream->Read(&resp));  // blocks until the connection goes
  const grpc::Status status = stream->Finish();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(seconds, 30) << status.error_code() << " " << status.error_message();
  std::printf("stalled upload ended after %.1f s: %d %s\n", seconds, status.error_code(),
              status.error_message().c_str());
  const bool released = Eventually([&] {
    return InflightBytes(server.metrics_port()) == 0 &&
           InflightRequests(server.metrics_port()) == 0;
  });
  EXPECT_TRUE(released);
}

// Admission control counts a stream's bytes from its header on.
TEST(StreamAdmissionTest, StreamedBytesCountAgainstTheInflightBudget) {
  ServerProcess server;
  ASSERT_TRUE(
      server
          .Start(TENSOROPS_SERVER_PATH,
                 {"--metrics_port=0", "--max_inflight_bytes=100000000", "--budget_wait=500ms"})
          .ok());
  auto stub = StubOf(server);
  auto header = [](int64_t n) {
    return Header("Reverse", {{v1::DATA_TYPE_UINT8, {n}}, {v1::DATA_TYPE_INT64, {0}}}, {});
  };
  {
    SCOPED_TRACE("alone larger than the budget");
    Result r = Call(stub.get(), {header(60000000)});  // 60 MB in + 60 MB out
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(r.status.error_message(), HasSubstr("--max_inflight_bytes=100000000"));
  }
  // One open stream holds 80 MB; a second one of 40 MB does not fit next to it.
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> first = stub->ExecuteStream(&ctx);
  ASSERT_TRUE(first->Write(header(40000000)));
  const bool held = Eventually([&] { return InflightBytes(server.metrics_port()) == 80000000; });
  ASSERT_TRUE(held);
  // It waits --budget_wait for the budget, as a unary call does, then is refused.
  const auto t0 = Clock::now();
  Result second = Call(stub.get(), {header(20000000)});
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.status.error_message(), HasSubstr("in-flight byte budget exhausted"));
  EXPECT_EQ(testing::ScrapeSample(server.metrics_port(), "tensorops_rejected_requests_total",
                                  {{"limit", "inflight_bytes"}}),
            2);
  ctx.TryCancel();
  first->Finish();
  // The server sees the cancel a moment after the client does.
  const bool released = Eventually([&] { return InflightBytes(server.metrics_port()) == 0; });
  EXPECT_TRUE(released);
  EXPECT_EQ(Call(stub.get(), {header(20000000)}).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // admitted now; then short of data
}

// A stream whose header finds the budget busy waits for it (--budget_wait,
// first come first served) instead of being refused at once, and runs as
// soon as the stream that held the budget goes.
TEST(StreamAdmissionTest, AHeaderWaitsForABusyBudgetAndRunsWhenItFrees) {
  ServerProcess server;
  ASSERT_TRUE(
      server
          .Start(TENSOROPS_SERVER_PATH,
                 {"--metrics_port=0", "--max_inflight_bytes=100000000", "--budget_wait=60s"})
          .ok());
  auto stub = StubOf(server);
  auto header = [](const std::string& data) {
    v1::ExecuteStreamRequest h = Header(
        "Reverse",
        {{v1::DATA_TYPE_UINT8, {static_cast<int64_t>(data.size())}}, {v1::DATA_TYPE_INT64, {1}}},
        {data, Bytes(std::vector<int64_t>{0})});
    (*h.mutable_header()->mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
    return h;
  };
  // The first stream holds 80 MB of the 100 MB budget and sends nothing more.
  grpc::ClientContext holder_ctx;
  std::unique_ptr<Stream> holder = stub->ExecuteStream(&holder_ctx);
  ASSERT_TRUE(holder->Write(header(std::string(40000000, '\0'))));
  const bool held = Eventually([&] { return InflightBytes(server.metrics_port()) >= 80000000; });
  ASSERT_TRUE(held);
  // A Reverse of 20 MB (40 MB with its output) does not fit next to it.
  std::string data(20000000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 % 251);
  std::vector<v1::ExecuteStreamRequest> messages = {header(data)};
  AddChunks(&messages, 0, data, 1 << 20);
  AddChunks(&messages, 1, Bytes(std::vector<int64_t>{0}), 8);
  std::atomic<bool> finished{false};
  Result waiter;
  std::thread call([&] {
    waiter = Call(stub.get(), messages);
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_FALSE(finished.load()) << "refused at once: " << waiter.status.error_message();
  holder_ctx.TryCancel();
  holder->Finish();
  call.join();
  ASSERT_TRUE(waiter.status.ok()) << waiter.status.error_code() << " "
                                  << waiter.status.error_message();
  std::string reversed(data.rbegin(), data.rend());
  EXPECT_TRUE(waiter.output == reversed);
  EXPECT_EQ(testing::ScrapeSample(server.metrics_port(), "tensorops_rejected_requests_total",
                                  {{"limit", "inflight_bytes"}}),
            0);
}

}  // namespace
}  // namespace tensorops
