// Chains through the SDK (Client::Chain, OpChain) against a real server, over
// Execute and ExecuteStream: the same result as calling the ops one by one,
// errors naming the step, the client-side checks, and docs/sdk.md's chain
// example compiled as written.
#include <atomic>
#include <complex>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// docs/sdk.md's chain example: the ```cpp block after its marker line,
// extracted at build time (extract_doc_snippet.cmake) and compiled here.
struct DocExampleResults {
  absl::StatusOr<Tensor> out;
  absl::StatusOr<Tensor> mirrored;
};
DocExampleResults RunDocChainExample(const std::unique_ptr<Client>& client) {
#include "sdk_md_chain_example.inc"
  return {std::move(out), std::move(mirrored)};
}

Tensor I64(std::vector<int64_t> v) { return Tensor(v); }

// A chain's ops run one call each through the SDK: what the chain must equal.
absl::StatusOr<Tensor> OneByOne(const Client& client, const Tensor& data, const OpChain& chain) {
  Tensor current = data;
  for (const ChainStep& op : chain.ops()) {
    std::vector<Tensor> inputs = {current};
    inputs.insert(inputs.end(), op.inputs.begin(), op.inputs.end());
    CallOptions call;
    call.transport = Transport::kUnary;
    ExecuteResult out = client.Execute(op.op, op.attrs, inputs, call);
    if (!out.ok()) return out.status();
    if (out->size() != 1) return absl::InternalError("not one output");
    current = out->front();
  }
  return current;
}

// Distinct element bit patterns of `dtype` (BOOL 0/1; finite floats).
Tensor Pattern(DataType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (dtype == DataType::kString) {
    std::vector<std::string> s(n);
    for (int64_t i = 0; i < n; ++i) s[i] = std::string(i % 3, 'a' + i % 26) + std::to_string(i);
    return Tensor(std::move(s), std::move(shape));
  }
  const int64_t w = DataTypeWidth(dtype);
  std::string bytes(n * w, '\0');
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < w; ++b) {
      bytes[i * w + b] = dtype == DataType::kBool
                             ? (b == 0 ? (i * 7 + i / 3) % 2 : 0)
                             : static_cast<char>((i * 37 + b * 11 + i / 5) & 0x3f);
    }
  }
  return Tensor::Copy(dtype, std::move(shape), bytes.data());
}

class ChainTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess;
    ASSERT_TRUE(server_->Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0"}).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = MakeClient();
    ASSERT_NE(client_, nullptr);
  }
  // GetParam(): streamed. Then every call with non-STRING inputs goes through
  // ExecuteStream (threshold 0) in small chunks.
  std::unique_ptr<Client> MakeClient() {
    ClientOptions options;
    options.target = server_->address();
    if (Streamed()) {
      options.stream_threshold_bytes = 0;
      options.stream_chunk_bytes = 4096;
    }
    auto c = Client::Create(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  static bool Streamed() { return GetParam(); }

  static ServerProcess* server_;
  std::unique_ptr<Client> client_;
};
ServerProcess* ChainTest::server_ = nullptr;

INSTANTIATE_TEST_SUITE_P(Transports, ChainTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Streamed" : "Unary";
                         });

// docs/api.md's example: Reverse rows, then Roll by 1 along axis 1.
TEST_P(ChainTest, ApiExample) {
  const Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  absl::StatusOr<Tensor> out = client_->Chain(data).Reverse({0}).Roll({1}, {1}).Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DataType::kInt32);
  EXPECT_THAT(out->shape(), ElementsAre(2, 3));
  EXPECT_THAT(out->values<int32_t>(), ElementsAre(6, 4, 5, 3, 1, 2));
}

TEST_P(ChainTest, DocsChainExample) {
  DocExampleResults r = RunDocChainExample(client_);
  ASSERT_TRUE(r.out.ok()) << r.out.status();
  EXPECT_THAT(r.out->shape(), ElementsAre(2, 3));
  EXPECT_THAT(r.out->values<int32_t>(), ElementsAre(4, 6, 5, 2, 1, 3));
  ASSERT_TRUE(r.mirrored.ok()) << r.mirrored.status();
  EXPECT_THAT(r.mirrored->values<int32_t>(), ElementsAre(2, 1, 3, 5, 4, 6));
}

// Every chain of the table, on every element type, equals its ops called one
// by one through the SDK, bit for bit.
TEST_P(ChainTest, EqualsOpsOneByOne) {
  struct Row {
    const char* name;
    std::vector<int64_t> shape;
    std::function<OpChain(OpChain)> ops;
  };
  const std::vector<Row> rows = {
      {"one op is the op", {3, 4}, [](OpChain c) { return c.Roll({1}, {0}); }},
      {"reverse then roll", {2, 3}, [](OpChain c) { return c.Reverse({0}).Roll({1}, {1}); }},
      {"every op",
       {4, 3, 5},
       [](OpChain c) {
         return c.Roll({-1, 2}, {0, 2})
             .Reverse(Tensor(std::vector<bool>{false, true, true}), ReverseMode::kMask)
             .ReverseSequence(Tensor(std::vector<int32_t>{3, 1, 0, 2, 3}), 2, 0)
             .OnnxReverseSequence({4, 1, 3}, /*batch_axis=*/1, /*time_axis=*/0)
             .Reverse({-1});
       }},
      {"by name and alias, mixed",
       {6, 2},
       [](OpChain c) {
         return c.Then("Reverse-1", {{"mode", "index"}}, {I64({1})})
             .Then("Roll-7", {}, {Tensor::Scalar<int64_t>(4), Tensor::Scalar<int64_t>(0)})
             .Then("onnx.ReverseSequence", {{"batch_axis", 1}, {"time_axis", 0}}, {I64({5, 2})})
             .ReverseSequence(Tensor(std::vector<float>{1, 2, 0, 2, 1, 2}), 0, 1);
       }},
      {"an op and its inverse",
       {5, 7},
       [](OpChain c) {
         return c.Roll({3}, {1}).Roll({-3}, {1}).Reverse({0, 1}).Reverse({1, 0});
       }},
      {"size-1 dims",
       {1, 4, 1, 3},
       [](OpChain c) {
         return c.Reverse({1, 2}).Roll({2, 1}, {1, 3}).Reverse({0});
       }},
      {"no elements",
       {3, 0, 2},
       [](OpChain c) { return c.Roll({1}, {0}).Reverse({2}).Roll({5}, {1}); }},
      {"a long chain",
       {4, 4},
       [](OpChain c) {
         for (int i = 0; i < 20; ++i) c.Roll({i}, {i % 2}).Reverse({i % 2});
         return c;
       }},
  };
  const DataType types[] = {DataType::kInt32,   DataType::kUInt8,      DataType::kFloat16,
                            DataType::kFloat64, DataType::kComplex128, DataType::kBool,
                            DataType::kInt64,   DataType::kString};
  for (const Row& row : rows) {
    for (DataType dtype : types) {
      SCOPED_TRACE(absl::StrCat(row.name, ", ", DataTypeName(dtype)));
      const Tensor data = Pattern(dtype, row.shape);
      const OpChain chain = row.ops(client_->Chain(data));
      absl::StatusOr<Tensor> want = OneByOne(*client_, data, chain);
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<Tensor> got = chain.Run();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(*got == *want) << got->DebugString() << " vs " << want->DebugString();
      ExecuteResult all = chain.RunAll();
      ASSERT_TRUE(all.ok()) << all.status();
      ASSERT_EQ(all->size(), 1u);
      EXPECT_TRUE(all->front() == *want);
    }
  }
}

// Streamed chains move the data in chunks: a few MiB with 4 KiB chunks, a
// progress report per chunk and the chain's output size known from the start.
TEST_P(ChainTest, BigTensorAndProgress) {
  const Tensor data = Pattern(DataType::kUInt16, {512, 3, 1024});  // 3 MiB
  const OpChain chain = client_->Chain(data)
                            .Reverse({1})
                            .Roll({7, -300}, {0, 2})
                            .ReverseSequence({3, 1, 2}, /*batch_axis=*/1, /*seq_axis=*/0);
  int reports = 0;
  int64_t expected = -1;
  CallOptions call;
  call.progress = [&](const TransferProgress& p) {
    ++reports;
    if (expected < 0) expected = p.expected_bytes_to_receive;
  };
  absl::StatusOr<Tensor> got = chain.Run(call);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<Tensor> want = OneByOne(*client_, data, chain);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(*got == *want);
  if (Streamed()) {
    // 3 MiB sent in 4 KiB chunks (the reply's chunks are the server's size).
    EXPECT_GT(reports, 768);
    EXPECT_EQ(expected, 3 << 20);
  } else {
    EXPECT_EQ(reports, 0) << "progress is for streamed calls only";
  }
}

// CallOptions::transport forces either path whatever the threshold.
TEST_P(ChainTest, TransportOverride) {
  const Tensor data = Pattern(DataType::kInt8, {3, 5});
  const OpChain chain = client_->Chain(data).Roll({2}, {1}).Reverse({0});
  absl::StatusOr<Tensor> want = OneByOne(*client_, data, chain);
  ASSERT_TRUE(want.ok()) << want.status();
  for (Transport t : {Transport::kUnary, Transport::kStream, Transport::kAuto}) {
    SCOPED_TRACE(static_cast<int>(t));
    int reports = 0;
    CallOptions call;
    call.transport = t;
    call.progress = [&](const TransferProgress&) { ++reports; };
    absl::StatusOr<Tensor> got = chain.Run(call);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == *want);
    const bool streamed = t == Transport::kStream || (t == Transport::kAuto && Streamed());
    EXPECT_EQ(reports > 0, streamed);
  }
}

// An error in the op after the first i names it: "then[i] (Op): ...". The
// first op's errors read as the single call's.
TEST_P(ChainTest, ErrorsNameTheStep) {
  const Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  struct Row {
    const char* name;
    std::function<OpChain(OpChain)> ops;
    absl::StatusCode code;
    std::string prefix;
    std::string detail;
  };
  const std::vector<Row> rows = {
      {"axis out of range in then[0]", [](OpChain c) { return c.Reverse({0}).Roll({1}, {2}); },
       absl::StatusCode::kInvalidArgument,
       "then[0] (Roll): ", "axes[0] = 2 is out of range [-2, 1] for data of rank 2"},
      {"bad attribute in then[2]",
       [](OpChain c) {
         return c.Reverse({0}).Roll({1}, {1}).Reverse({1}).Then("Reverse", {{"mode", "sideways"}},
                                                                {I64({0})});
       },
       absl::StatusCode::kInvalidArgument, "then[2] (Reverse): ", "sideways"},
      {"a length past the data in then[0]",
       [](OpChain c) {
         return c.Roll({1}, {0}).ReverseSequence({4, 1}, 0, 1);
       },
       absl::StatusCode::kInvalidArgument, "then[0] (ReverseSequence): ", "seq_lengths"},
      {"unknown op in then[1]",
       [](OpChain c) { return c.Reverse({0}).Roll({1}, {1}).Then("Frobnicate"); },
       absl::StatusCode::kUnimplemented, "then[1]", "Frobnicate"},
      {"missing input in then[0]",
       [](OpChain c) { return c.Reverse({0}).Then("Roll", {}, {I64({1})}); },
       absl::StatusCode::kInvalidArgument, "then[0] (Roll): ", ""},
      {"the first op's error is the single call's",
       [](OpChain c) { return c.Roll({1}, {2}).Reverse({0}); }, absl::StatusCode::kInvalidArgument,
       "Roll: axes[0] = 2 is out of range [-2, 1] for data of rank 2", ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    absl::StatusOr<Tensor> out = row.ops(client_->Chain(data)).Run();
    EXPECT_EQ(out.status().code(), row.code) << out.status();
    EXPECT_THAT(std::string(out.status().message()), StartsWith(row.prefix));
    EXPECT_THAT(out.status().message(), HasSubstr(row.detail));
  }
}

// The server takes 64 ops after the first, not 65.
TEST_P(ChainTest, AtMost64StepsAfterTheFirst) {
  const Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  OpChain chain = client_->Chain(data).Reverse({1});
  for (int i = 0; i < 64; ++i) chain.Reverse({1});
  absl::StatusOr<Tensor> out = chain.Run();  // 65 reversals: one
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->values<int32_t>(), ElementsAre(3, 2, 1, 6, 5, 4));
  chain.Reverse({1});
  out = chain.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("64"));
}

// What the SDK rejects before sending, naming the step and the input in the
// op's own order (data is inputs[0]).
TEST_P(ChainTest, InvalidStepInputRejectedBeforeSending) {
  const Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  absl::StatusOr<Tensor> out =
      client_->Chain(data)
          .Reverse({0})
          .Roll(Tensor(std::vector<int64_t>{1, 2}, {3}), Tensor::Scalar<int64_t>(0))
          .Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "then[0] (Roll): inputs[1]: 2 INT64 values for shape [3] of 3 elements");
  out = client_->Chain(Tensor(std::vector<int32_t>{1}, {2})).Reverse({0}).Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "inputs[0]: 1 INT32 values for shape [2] of 2 elements");
  out = client_->Chain(data).Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("no op"));
}

// A built chain is a value: run again, copied, from many threads, after its
// Client is gone.
TEST_P(ChainTest, ReusedFromThreadsAndOutlivesClient) {
  const Tensor data = Pattern(DataType::kFloat32, {8, 16});
  const OpChain chain = client_->Chain(data).Roll({3, -5}, {0, 1}).Reverse({1});
  absl::StatusOr<Tensor> want = OneByOne(*client_, data, chain);
  ASSERT_TRUE(want.ok()) << want.status();
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const OpChain mine = t % 2 == 0 ? chain : OpChain(chain);
      for (int i = 0; i < 10; ++i) {
        absl::StatusOr<Tensor> got = mine.Run();
        if (got.ok() && *got == *want) ++good;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(good.load(), 40);
  // Appending to a copy leaves the original as it was.
  OpChain longer = chain;
  longer.Reverse({0});
  EXPECT_EQ(chain.ops().size(), 2u);
  EXPECT_EQ(longer.ops().size(), 3u);
  client_.reset();
  absl::StatusOr<Tensor> after = chain.Run();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(*after == *want);
}

}  // namespace
}  // namespace tensorops
