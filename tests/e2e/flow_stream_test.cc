// Flowing ExecuteStream (StreamHeader.flow, ../shared/api.md "Streams that
// flow") against the real server with a hand-built client: the replies are
// read on a thread of their own while the input is sent, every output chunk
// is checked (its CRC-32, each output byte once) and placed by offset after
// the test shuffles them (a client may not rely on their order), the
// trailer's CRC; the result is bit-identical to Execute and to a
// non-flowing stream for random ops, chains, types and ranks. Then the
// failures (wrong CRCs: DATA_LOSS), cancel and deadline mid-stream (the
// window given back to admission), and the window bounding the server's
// memory for a stream much bigger than it.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
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
#include "tests/seed.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::HasSubstr;
using Stream = grpc::ClientReaderWriter<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>;

constexpr int64_t kChunk = 64 << 10;
constexpr int64_t kWindow = 4 << 20;

uint32_t Crc(absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

v1::Tensor I64(const std::vector<int64_t>& v) {
  v1::Tensor t;
  t.set_dtype(v1::DATA_TYPE_INT64);
  t.add_shape(static_cast<int64_t>(v.size()));
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
  return t;
}

// One op of a call: its name, attrs and inputs after the data.
struct Op {
  std::string name;
  std::vector<std::pair<std::string, google::protobuf::Value>> attrs;
  std::vector<v1::Tensor> inputs;
};

google::protobuf::Value Num(double v) {
  google::protobuf::Value x;
  x.set_number_value(v);
  return x;
}
google::protobuf::Value Str(const std::string& v) {
  google::protobuf::Value x;
  x.set_string_value(v);
  return x;
}

Op RandomOp(const std::vector<int64_t>& shape, std::mt19937_64* rng) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto pick = [rng](int64_t n) { return static_cast<int64_t>((*rng)() % n); };
  Op op;
  switch (rank >= 2 ? pick(4) : pick(2)) {
    case 0: {
      op.name = "Roll";
      std::vector<int64_t> shift, axes;
      for (int64_t n = 1 + pick(rank); n > 0; --n) {
        axes.push_back(pick(rank));
        shift.push_back(pick(2001) - 1000);
      }
      op.inputs = {I64(shift), I64(axes)};
      break;
    }
    case 1: {
      op.name = "Reverse";
      op.attrs.push_back({"mode", Str("index")});
      std::vector<int64_t> axes;
      for (int64_t a = 0; a < rank; ++a) {
        if (pick(2) == 0) axes.push_back(a);
      }
      op.inputs = {I64(axes)};
      break;
    }
    case 2: {
      op.name = "ReverseSequence";
      const int64_t b = pick(rank);
      int64_t q = pick(rank - 1);
      if (q >= b) ++q;
      op.attrs = {{"batch_axis", Num(b)}, {"seq_axis", Num(q)}};
      std::vector<int64_t> lengths;
      for (int64_t i = 0; i < shape[b]; ++i) lengths.push_back(pick(shape[q] + 1));
      op.inputs = {I64(lengths)};
      break;
    }
    default: {
      op.name = "onnx.ReverseSequence";
      const int64_t b = pick(2);
      op.attrs = {{"batch_axis", Num(b)}, {"time_axis", Num(1 - b)}};
      std::vector<int64_t> lengths;
      for (int64_t i = 0; i < shape[b]; ++i) lengths.push_back(pick(shape[1 - b] + 1));
      op.inputs = {I64(lengths)};
      break;
    }
  }
  return op;
}

// A call: the data tensor and its ops (the first op's, then a chain's steps).
struct Case {
  v1::DataType dtype = v1::DATA_TYPE_UINT8;
  std::vector<int64_t> shape;
  std::string data;
  std::vector<Op> ops;
};

void FillAttrs(const Op& op, google::protobuf::Struct* out) {
  for (const auto& [k, v] : op.attrs) (*out->mutable_fields())[k] = v;
}

v1::ExecuteRequest ExecuteOf(const Case& c) {
  v1::ExecuteRequest r;
  r.set_op(c.ops[0].name);
  FillAttrs(c.ops[0], r.mutable_attrs());
  v1::Tensor* d = r.add_inputs();
  d->set_dtype(c.dtype);
  for (int64_t s : c.shape) d->add_shape(s);
  d->set_raw_data(c.data);
  for (const v1::Tensor& t : c.ops[0].inputs) *r.add_inputs() = t;
  for (size_t i = 1; i < c.ops.size(); ++i) {
    v1::Step* s = r.add_then();
    s->set_op(c.ops[i].name);
    FillAttrs(c.ops[i], s->mutable_attrs());
    for (const v1::Tensor& t : c.ops[i].inputs) *s->add_inputs() = t;
  }
  return r;
}

// The stream's messages: header, the small inputs, then the data (or, with
// `data_first`, the data before them).
std::vector<v1::ExecuteStreamRequest> StreamOf(const Case& c, bool flow, bool data_first = false) {
  const v1::ExecuteRequest r = ExecuteOf(c);
  std::vector<v1::ExecuteStreamRequest> m(1);
  v1::StreamHeader* h = m[0].mutable_header();
  h->set_op(r.op());
  *h->mutable_attrs() = r.attrs();
  *h->mutable_then() = r.then();
  h->set_flow(flow);
  for (const v1::Tensor& t : r.inputs()) {
    v1::TensorHeader* th = h->add_inputs();
    th->set_dtype(t.dtype());
    *th->mutable_shape() = t.shape();
    th->set_crc32(Crc(t.raw_data()));
  }
  auto chunks = [&](int i) {
    const std::string& bytes = r.inputs(i).raw_data();
    for (size_t off = 0; off < bytes.size(); off += kChunk) {
      v1::ExecuteStreamRequest x;
      x.mutable_chunk()->set_tensor(i);
      x.mutable_chunk()->set_offset(off);
      x.mutable_chunk()->set_data(bytes.substr(off, kChunk));
      x.mutable_chunk()->set_crc32(Crc(x.chunk().data()));
      m.push_back(std::move(x));
    }
  };
  if (data_first) chunks(0);
  for (int i = 1; i < r.inputs_size(); ++i) chunks(i);
  if (!data_first) chunks(0);
  return m;
}

struct Reply {
  grpc::Status status;
  v1::StreamOutputHeader header;
  std::vector<v1::TensorChunk> chunks;
  bool trailer = false;
  uint32_t trailer_crc = 0;
  int64_t first_output_after_sent = -1;  // input bytes sent when the first chunk came
};

// Sends `messages` on this thread while another reads the replies.
Reply Converse(v1::TensorOps::Stub* stub, const std::vector<v1::ExecuteStreamRequest>& messages,
               std::chrono::seconds deadline = std::chrono::seconds(120),
               std::chrono::milliseconds pause = std::chrono::milliseconds(0),
               bool keep_chunks = true) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  std::unique_ptr<Stream> stream = stub->ExecuteStream(&ctx);
  Reply r;
  std::atomic<int64_t> sent{0};
  std::thread reader([&] {
    v1::ExecuteStreamResponse resp;
    while (stream->Read(&resp)) {
      if (resp.has_header()) {
        r.header = resp.header();
      } else if (resp.has_chunk()) {
        if (r.first_output_after_sent < 0) r.first_output_after_sent = sent.load();
        if (keep_chunks) r.chunks.push_back(resp.chunk());
      } else if (resp.has_trailer()) {
        r.trailer = true;
        r.trailer_crc = resp.trailer().crc32_size() == 1 ? resp.trailer().crc32(0) : 0;
      }
    }
  });
  bool writing = true;
  for (const auto& m : messages) {
    writing = stream->Write(m);
    if (!writing) break;
    if (m.has_chunk()) sent += static_cast<int64_t>(m.chunk().data().size());
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  // A failed Write means the call is over (Finish says why), as the SDK
  // does: no WritesDone then.
  if (writing) stream->WritesDone();
  reader.join();
  r.status = stream->Finish();
  return r;
}

// The output placed from shuffled chunks, each checked; empty on a fault.
std::string Place(Reply r, int64_t bytes, std::mt19937_64* rng) {
  std::shuffle(r.chunks.begin(), r.chunks.end(), *rng);
  std::string out(static_cast<size_t>(bytes), '\0');
  std::vector<uint8_t> written(out.size(), 0);
  for (const v1::TensorChunk& c : r.chunks) {
    EXPECT_EQ(c.crc32(), Crc(c.data()));
    EXPECT_LE(c.offset() + c.data().size(), out.size());
    if (c.offset() + c.data().size() > out.size()) return "";
    for (size_t k = 0; k < c.data().size(); ++k) {
      EXPECT_EQ(written[c.offset() + k]++, 0) << "output byte " << c.offset() + k << " twice";
    }
    out.replace(c.offset(), c.data().size(), c.data());
  }
  EXPECT_EQ(std::count(written.begin(), written.end(), 1), bytes) << "output bytes missing";
  EXPECT_TRUE(r.trailer);
  EXPECT_EQ(r.trailer_crc, Crc(out));
  return out;
}

std::string InOrder(const Reply& r) {
  std::string out;
  for (const v1::TensorChunk& c : r.chunks) {
    EXPECT_EQ(c.offset(), out.size());
    out += c.data();
  }
  EXPECT_FALSE(r.trailer);
  return out;
}

double Gauge(const ServerProcess& s, const std::string& name) {
  return testing::ScrapeSample(s.metrics_port(), name, {});
}

bool InflightBackToZero(const ServerProcess& s) {
  for (int i = 0; i < 1000; ++i) {
    if (Gauge(s, "tensorops_inflight_requests") == 0 && Gauge(s, "tensorops_inflight_bytes") == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class FlowStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess;
    ASSERT_TRUE(server_
                    ->Start(TENSOROPS_SERVER_PATH,
                            {"--metrics_port=0", absl::StrCat("--stream_chunk_bytes=", kChunk),
                             absl::StrCat("--stream_window_bytes=", kWindow), "--threads=2",
                             "--max_stream_bytes=8589934592", "--buffer_cache_idle=200ms"})
                    .ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    grpc::ChannelArguments args;  // Execute's answers pass gRPC's 4 MB default
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = v1::TensorOps::NewStub(
        grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  }

  static ServerProcess* server_;
  std::unique_ptr<v1::TensorOps::Stub> stub_;
};
ServerProcess* FlowStreamTest::server_ = nullptr;

TEST_F(FlowStreamTest, RandomOpsChainsTypesAndRanksAreBitIdenticalToExecute) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(37));
  const std::pair<v1::DataType, int64_t> types[] = {
      {v1::DATA_TYPE_UINT8, 1},   {v1::DATA_TYPE_INT16, 2},       {v1::DATA_TYPE_FLOAT32, 4},
      {v1::DATA_TYPE_FLOAT64, 8}, {v1::DATA_TYPE_COMPLEX128, 16}, {v1::DATA_TYPE_BOOL, 1},
      {v1::DATA_TYPE_BFLOAT16, 2}};
  for (int iter = 0; iter < 60; ++iter) {
    Case c;
    const auto [dtype, width] = types[rng() % (sizeof(types) / sizeof(types[0]))];
    c.dtype = dtype;
    const int64_t rank = 1 + static_cast<int64_t>(rng() % 4);
    int64_t elems = 1;
    for (int64_t a = 0; a < rank; ++a) {
      const int64_t d = rng() % 3 == 0 ? 1 + rng() % 8 : 16 + rng() % 200;
      c.shape.push_back(d);
      elems *= d;
    }
    if (elems * width > (48 << 20)) continue;
    c.data.resize(static_cast<size_t>(elems * width));
    for (char& b : c.data) b = static_cast<char>(dtype == v1::DATA_TYPE_BOOL ? rng() % 2 : rng());
    for (int64_t n = 1 + static_cast<int64_t>(rng() % 4); n > 0; --n) {
      c.ops.push_back(RandomOp(c.shape, &rng));
    }
    SCOPED_TRACE(absl::StrCat("iteration ", iter, ": ", c.data.size(), " bytes, ", c.ops.size(),
                              " ops, first ", c.ops[0].name));
    grpc::ClientContext ctx;
    v1::ExecuteResponse expected;
    grpc::Status s = stub_->Execute(&ctx, ExecuteOf(c), &expected);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::string& want = expected.outputs(0).raw_data();
    const Reply flowed = Converse(stub_.get(), StreamOf(c, true));
    ASSERT_TRUE(flowed.status.ok()) << flowed.status.error_message();
    ASSERT_EQ(flowed.header.outputs_size(), 1);
    EXPECT_EQ(flowed.header.outputs(0).crc32(), 0u);  // the trailer has it
    EXPECT_TRUE(Place(flowed, static_cast<int64_t>(want.size()), &rng) == want);
    const Reply plain = Converse(stub_.get(), StreamOf(c, false));
    ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
    EXPECT_TRUE(InOrder(plain) == want);
  }
  EXPECT_TRUE(InflightBackToZero(*server_));
}

Case BigRoll(int64_t bytes) {
  Case c;
  c.shape = {bytes >> 10, 1024};
  c.data.assign(static_cast<size_t>(bytes), '\0');
  for (size_t i = 0; i < c.data.size(); i += 4093) c.data[i] = static_cast<char>(i >> 12);
  c.ops = {{"Roll", {}, {I64({12345}), I64({0})}}};
  return c;
}

TEST_F(FlowStreamTest, OutputStartsBeforeTheInputEndsAndDataFirstOnlyDelaysIt) {
  const Case c = BigRoll(64 << 20);
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  const Reply r = Converse(stub_.get(), StreamOf(c, true));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_GE(r.first_output_after_sent, 0);
  EXPECT_LT(r.first_output_after_sent, 32 << 20) << "the first output came after half the input";
  // The data before the shift and axes: held up to the window, then kept
  // whole (admitted again at inputs + output), the same output.
  const Reply late = Converse(stub_.get(), StreamOf(c, true, /*data_first=*/true));
  ASSERT_TRUE(late.status.ok()) << late.status.error_message();
  {
    grpc::ClientContext ctx;
    v1::ExecuteResponse expected;
    ASSERT_TRUE(stub_->Execute(&ctx, ExecuteOf(c), &expected).ok());
    EXPECT_TRUE(Place(late, 64 << 20, &rng) == expected.outputs(0).raw_data());
  }
  // Within the window it only waits.
  const Case small = BigRoll(1 << 20);
  const Reply ok = Converse(stub_.get(), StreamOf(small, true, /*data_first=*/true));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  grpc::ClientContext ctx;
  v1::ExecuteResponse expected;
  ASSERT_TRUE(stub_->Execute(&ctx, ExecuteOf(small), &expected).ok());
  EXPECT_TRUE(Place(ok, 1 << 20, &rng) == expected.outputs(0).raw_data());
}

TEST_F(FlowStreamTest, ALayoutThatDoesNotFlowIsBufferedAndStillSentWithCrcs) {
  // onnx.ReverseSequence's default time-major [time, batch] over bytes: each
  // output piece would be one byte, so the server buffers the 8 MiB call
  // (more than its 4 MiB window) and sends it as a flowing answer.
  Case c;
  c.shape = {1 << 20, 8};
  c.data.resize(8 << 20);
  std::mt19937_64 rng(::tensorops::testing::TestSeed(5));
  for (char& b : c.data) b = static_cast<char>(rng());
  c.ops = {{"onnx.ReverseSequence", {}, {I64({1 << 20, 5, 0, 1, 77, 1 << 19, 3, 1000})}}};
  grpc::ClientContext ctx;
  v1::ExecuteResponse expected;
  ASSERT_TRUE(stub_->Execute(&ctx, ExecuteOf(c), &expected).ok());
  const Reply r = Converse(stub_.get(), StreamOf(c, true));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(Place(r, 8 << 20, &rng) == expected.outputs(0).raw_data());
  EXPECT_TRUE(InflightBackToZero(*server_));
}

TEST_F(FlowStreamTest, WrongCrcsAreDataLoss) {
  const Case c = BigRoll(1 << 20);
  std::vector<v1::ExecuteStreamRequest> m = StreamOf(c, true);
  // A chunk's own CRC.
  std::vector<v1::ExecuteStreamRequest> bad_chunk = m;
  bad_chunk.back().mutable_chunk()->set_crc32(bad_chunk.back().chunk().crc32() ^ 1);
  Reply r = Converse(stub_.get(), bad_chunk);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(r.status.error_message(), HasSubstr("is corrupt"));
  // The header's CRC of the whole data: known only at the end, after output went out.
  std::vector<v1::ExecuteStreamRequest> bad_header = m;
  v1::TensorHeader* h = bad_header[0].mutable_header()->mutable_inputs(0);
  h->set_crc32(h->crc32() ^ 1);
  r = Converse(stub_.get(), bad_header);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(r.status.error_message(), HasSubstr("the output already sent is void"));
  EXPECT_FALSE(r.trailer);
  EXPECT_TRUE(InflightBackToZero(*server_));
}

// Sends `bytes` of a flowing Roll without reading a reply, then ends the
// call by a cancel (`cancel`) or its deadline; the server must give its window back.
void Abandon(v1::TensorOps::Stub* stub, int64_t bytes, bool cancel, const ServerProcess& server) {
  // The messages first: building 256 MiB of them must not eat the deadline.
  const std::vector<v1::ExecuteStreamRequest> m = StreamOf(BigRoll(bytes), true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(cancel ? 60 : 4));
  std::unique_ptr<Stream> stream = stub->ExecuteStream(&ctx);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (const auto& x : m) {
      if (stop || !stream->Write(x)) break;
    }
  });
  // Nothing read: the server's window fills and it waits; it holds the
  // window, no more.
  double requests = 0;
  for (int i = 0; i < 200 && requests != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    requests = Gauge(server, "tensorops_inflight_requests");
  }
  EXPECT_EQ(requests, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(Gauge(server, "tensorops_inflight_bytes"), kWindow + 16);
  if (cancel) ctx.TryCancel();
  stop = true;
  writer.join();
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(),
            cancel ? grpc::StatusCode::CANCELLED : grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(InflightBackToZero(server));
}

TEST_F(FlowStreamTest, CancelAndDeadlineMidStreamGiveTheWindowBack) {
  Abandon(stub_.get(), 256 << 20, /*cancel=*/true, *server_);
  Abandon(stub_.get(), 256 << 20, /*cancel=*/false, *server_);
  // The server still serves.
  const Reply r = Converse(stub_.get(), StreamOf(BigRoll(1 << 20), true));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

TEST_F(FlowStreamTest, AStreamManyTimesTheWindowStaysWithinIt) {
  // 1 GiB through a 4 MiB window (512 MiB under sanitizers, which are slow).
  const int64_t bytes = testing::kSanitized ? int64_t{512} << 20 : int64_t{1} << 30;
  const int64_t baseline_kib = server_->StatusKiB("VmRSS:");
  std::atomic<bool> done{false};
  double most_bytes = 0;
  int64_t most_rss = 0;
  std::thread watch([&] {
    while (!done) {
      most_bytes = std::max(most_bytes, Gauge(*server_, "tensorops_inflight_bytes"));
      most_rss = std::max(most_rss, server_->StatusKiB("VmRSS:"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // Generated as it is sent: the test does not hold the tensor either.
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = stub_->ExecuteStream(&ctx);
  Case c = BigRoll(0);
  c.shape = {bytes >> 10, 1024};
  std::vector<v1::ExecuteStreamRequest> m = StreamOf(c, true);  // header, shift, axes
  std::string piece(kChunk, '\0');
  for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<char>(i * 31);
  uint32_t crc = 0;
  for (int64_t off = 0; off < bytes; off += kChunk) {
    crc = static_cast<uint32_t>(
        crc32_z(crc, reinterpret_cast<const Bytef*>(piece.data()), piece.size()));
  }
  m[0].mutable_header()->mutable_inputs(0)->set_crc32(crc);
  int64_t received = 0;
  uLong out_crc_check = 0;
  std::thread reader([&] {
    v1::ExecuteStreamResponse resp;
    while (stream->Read(&resp)) {
      if (resp.has_chunk()) received += static_cast<int64_t>(resp.chunk().data().size());
      if (resp.has_chunk()) EXPECT_EQ(resp.chunk().crc32(), Crc(resp.chunk().data()));
      if (resp.has_trailer()) out_crc_check = resp.trailer().crc32(0);
    }
  });
  for (const auto& x : m) ASSERT_TRUE(stream->Write(x));
  for (int64_t off = 0; off < bytes; off += kChunk) {
    v1::ExecuteStreamRequest x;
    x.mutable_chunk()->set_offset(off);
    x.mutable_chunk()->set_data(piece);
    if (!stream->Write(x)) break;
  }
  stream->WritesDone();
  reader.join();
  const grpc::Status s = stream->Finish();
  done = true;
  watch.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(received, bytes);
  // A roll of a periodic tensor by a whole number of periods' rows: the
  // output is the input, whose CRC the test knows.
  EXPECT_EQ(out_crc_check, crc);
  std::printf(
      "%lld MiB flowed: admission gauge peak %.0f bytes, server RSS %lld -> peak %lld KiB\n",
      static_cast<long long>(bytes >> 20), most_bytes, static_cast<long long>(baseline_kib),
      static_cast<long long>(most_rss));
  EXPECT_LE(most_bytes, kWindow + 16);
  if (!testing::kSanitized) {
    EXPECT_LT(most_rss - baseline_kib, (kWindow >> 10) + 64 * 1024)
        << "RSS grew from " << baseline_kib << " KiB to " << most_rss << " KiB";
  }
  EXPECT_TRUE(InflightBackToZero(*server_));
}

// Admission counts a flowing stream's window, not its tensor: with the
// in-flight budget of a 512 MiB container (40%: 205 MiB) and the default
// window, 8 concurrent 256 MiB flowing Rolls all run (non-flowing, each would
// need 512 MiB of budget and be refused).
TEST(FlowAdmissionTest, EightBigFlowingStreamsFitASmallBudget) {
  ServerProcess server;
  ASSERT_TRUE(
      server.Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--max_inflight_bytes=214748364"})
          .ok());
  auto stub = v1::TensorOps::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  const int64_t bytes = testing::kSanitized ? int64_t{64} << 20 : int64_t{256} << 20;
  const std::vector<v1::ExecuteStreamRequest> m = StreamOf(BigRoll(bytes), true);
  std::vector<Reply> replies(8);
  std::vector<std::thread> calls;
  for (Reply& r : replies) {
    calls.emplace_back([&] {
      r = Converse(stub.get(), m, std::chrono::seconds(240), std::chrono::milliseconds(0),
                   /*keep_chunks=*/false);
    });
  }
  for (std::thread& t : calls) t.join();
  for (const Reply& r : replies) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
    EXPECT_TRUE(r.trailer);
  }
  // Not flowing, 256 MiB needs 512 MiB of budget: refused at its header
  // (whatever size the flowing ones had: 64 MiB under sanitizers would fit).
  const Reply refused = Converse(stub.get(), StreamOf(BigRoll(int64_t{256} << 20), false));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// gRPC's memory quota nearly used up while flowing streams read: gRPC
// resets some of them (RST_STREAM ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED) and
// the server lives on. Before ExecuteStreamReactor::ReleaseSlices it died
// here (SIGSEGV in grpc_core::ExecCtx::Run, under a receive slice's last
// unref on a callback thread: 2 of 2 runs, and 2 of 4 runs of the
// memory-limit test under its derived --grpc_memory_bytes).
// This client's channel without gRPC's retry filter: with it (on by
// default), gRPC 1.51 left a sync bidi stream that the server's quota reset
// blocked in Read past its deadline (5 of 10 runs of FlowQuotaTest; the
// SDK's reader, which cancels on errors, did not hang in 7 runs of 24 such
// calls).
grpc::ChannelArguments NoRetries() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return args;
}

TEST(FlowQuotaTest, StreamsResetByGrpcsMemoryQuotaLeaveTheServerRunning) {
  ServerProcess server;
  ASSERT_TRUE(server
                  .Start(TENSOROPS_SERVER_PATH,
                         {"--metrics_port=0", "--grpc_memory_bytes=16777216", "--threads=2"})
                  .ok());
  auto stub = v1::TensorOps::NewStub(
      grpc::CreateCustomChannel(server.address(), grpc::InsecureChannelCredentials(), NoRetries()));
  const int64_t bytes = testing::kSanitized ? int64_t{16} << 20 : int64_t{64} << 20;
  const std::vector<v1::ExecuteStreamRequest> m = StreamOf(BigRoll(bytes), true);
  constexpr int kCallers = 6;
  constexpr int kRounds = 3;
  std::vector<std::vector<Reply>> replies(kCallers, std::vector<Reply>(kRounds));
  std::vector<std::thread> calls;
  for (std::vector<Reply>& mine : replies) {
    calls.emplace_back([&] {
      for (Reply& r : mine) {
        r = Converse(stub.get(), m, std::chrono::seconds(120), std::chrono::milliseconds(0),
                     /*keep_chunks=*/false);
      }
    });
  }
  for (std::thread& t : calls) t.join();
  ASSERT_TRUE(server.Signal(0)) << "the server died";
  int ok = 0;
  for (const std::vector<Reply>& mine : replies) {
    for (const Reply& r : mine) {
      if (r.status.ok()) {
        ++ok;
        EXPECT_TRUE(r.trailer);
      } else {
        // Reset by the quota (RST_STREAM 11), or the connection with it
        // (UNAVAILABLE "Broken pipe").
        EXPECT_THAT(r.status.error_code(), ::testing::AnyOf(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                                            grpc::StatusCode::UNAVAILABLE))
            << r.status.error_message();
      }
    }
  }
  std::printf("%d of %d flowing streams OK under a 16 MiB gRPC memory quota\n", ok,
              kCallers * kRounds);
  // Still serving.
  const Reply after = Converse(stub.get(), StreamOf(BigRoll(1 << 20), true));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(server.Stop(), 0);
}

// SIGTERM while flowing streams run: one still sending and reading ends OK
// inside --drain_timeout; one whose client reads nothing (the window full)
// is ended when the drain times out; the server exits 0 either way.
TEST(FlowDrainTest, SigtermMidStream) {
  for (const bool stalled : {false, true}) {
    SCOPED_TRACE(stalled ? "stalled" : "flowing");
    ServerProcess server;
    ASSERT_TRUE(server
                    .Start(TENSOROPS_SERVER_PATH,
                           {"--metrics_port=0", absl::StrCat("--stream_chunk_bytes=", kChunk),
                            absl::StrCat("--stream_window_bytes=", kWindow), "--drain_timeout=3s"})
                    .ok());
    auto stub = v1::TensorOps::NewStub(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    std::thread signal([&] {
      for (int i = 0; i < 1000 && Gauge(server, "tensorops_inflight_requests") != 1; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_TRUE(server.Signal(SIGTERM));
    });
    if (!stalled) {
      // 8 MiB in 128 chunks, 5 ms apart: mid-stream at the signal, done in ~0.7 s.
      const Reply r = Converse(stub.get(), StreamOf(BigRoll(8 << 20), true),
                               std::chrono::seconds(60), std::chrono::milliseconds(5));
      EXPECT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
      EXPECT_TRUE(r.trailer);
    } else {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      std::unique_ptr<Stream> stream = stub->ExecuteStream(&ctx);
      for (const auto& m : StreamOf(BigRoll(64 << 20), true)) {
        if (!stream->Write(m)) break;  // blocks once the server's window is full
      }
      const grpc::Status st = stream->Finish();
      EXPECT_FALSE(st.ok());
    }
    signal.join();
    const int exit_status = server.WaitForExit(15000);
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  }
}

}  // namespace
}  // namespace tensorops
