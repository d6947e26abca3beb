// Request size limits (wire/limits.h) and the overflow paths of decoding:
// shape products, byte sizes, string payloads, request totals, sums of Roll
// shifts. Also checks the limits reach the gRPC service (in-process server).
#include "wire/limits.h"

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/op_registry.h"
#include "server/server.h"
#include "server/v1/execution.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "wire/tensor_codec.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

v1::Tensor RawTensor(v1::DataType dtype, const std::vector<int64_t>& shape, size_t bytes) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  if (bytes > 0) t.set_raw_data(std::string(bytes, '\0'));
  return t;
}

v1::Tensor Int64s(const std::vector<int64_t>& values, bool scalar = false) {
  v1::Tensor t;
  t.set_dtype(v1::DATA_TYPE_INT64);
  if (!scalar) t.add_shape(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

v1::ExecuteRequest ReverseRequest(const v1::Tensor& data) {
  v1::ExecuteRequest r;
  r.set_op("Reverse");
  (*r.mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
  *r.add_inputs() = data;
  *r.add_inputs() = Int64s({});
  return r;
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterBuiltinOps(&registry_); }
  absl::Status Run(const v1::ExecuteRequest& r, const RequestLimits& limits = RequestLimits(),
                   v1::ExecuteResponse* response = nullptr) {
    v1::ExecuteResponse unused;
    return Execute(registry_, r, response != nullptr ? response : &unused, limits);
  }
  OpRegistry registry_;
};

TEST_F(LimitsTest, DefaultsAreTheDocumentedOnes) {
  const RequestLimits l;
  EXPECT_EQ(l.max_rank, 32);
  EXPECT_EQ(l.max_tensor_elements, int64_t{268435456});
  EXPECT_EQ(l.max_tensor_bytes, int64_t{268435456});
  EXPECT_EQ(l.max_request_bytes, int64_t{1073741824});
}

TEST_F(LimitsTest, RankAtTheLimitPassesAboveIsInvalidArgument) {
  EXPECT_TRUE(
      Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, std::vector<int64_t>(32, 1), 1))).ok());
  const absl::Status st =
      Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, std::vector<int64_t>(33, 1), 1)));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("inputs[0].shape has rank 33; the limit is 32 (--max_rank)"));
  // Also for the index inputs, and for a huge rank (bounded message).
  v1::ExecuteRequest r = ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, {2}, 2));
  *r.mutable_inputs(1) = RawTensor(v1::DATA_TYPE_INT64, std::vector<int64_t>(100000, 0), 0);
  const absl::Status st2 = Run(r);
  EXPECT_EQ(st2.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st2.message(), HasSubstr("inputs[1].shape has rank 100000"));
  EXPECT_LT(st2.message().size(), 1024u);
}

TEST_F(LimitsTest, ElementsPerTensor) {
  RequestLimits l;
  l.max_tensor_elements = 10;
  EXPECT_TRUE(Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, {2, 5}, 10)), l).ok());
  const absl::Status st = Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, {11}, 11)), l);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("inputs[0] has 11 elements"));
  EXPECT_THAT(st.message(), HasSubstr("the limit is 10 (--max_tensor_elements)"));
}

TEST_F(LimitsTest, HugeShapeIsRejectedBeforeAnyDataCheckOrAllocation) {
  // 2^40 INT8 elements and no data: the size limit answers, nothing is allocated.
  const absl::Status st =
      Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT8, {int64_t{1} << 20, int64_t{1} << 20}, 0)));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("--max_tensor_elements"));
}

TEST_F(LimitsTest, BytesPerTensor) {
  RequestLimits l;
  l.max_tensor_bytes = 40;
  EXPECT_TRUE(Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT32, {10}, 40)), l).ok());
  const absl::Status st = Run(ReverseRequest(RawTensor(v1::DATA_TYPE_INT32, {11}, 44)), l);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("inputs[0] needs 44 bytes"));
  EXPECT_THAT(st.message(), HasSubstr("the limit is 40 (--max_tensor_bytes)"));
}

TEST_F(LimitsTest, StringBytesCountTheirCharacters) {
  RequestLimits l;
  l.max_tensor_bytes = 16 * 2 + 10;  // two StringRefs + 10 characters
  v1::Tensor s;
  s.set_dtype(v1::DATA_TYPE_STRING);
  s.add_shape(2);
  s.add_string_data("hello");
  s.add_string_data("world");
  EXPECT_TRUE(Run(ReverseRequest(s), l).ok());
  s.set_string_data(1, "world!");
  const absl::Status st = Run(ReverseRequest(s), l);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("--max_tensor_bytes"));
  // A limit near int64's maximum: the running sum must not overflow.
  l.max_tensor_bytes = kI64Max;
  EXPECT_TRUE(Run(ReverseRequest(s), l).ok());
}

TEST_F(LimitsTest, BytesPerRequestCountInputsAndOutput) {
  RequestLimits l;
  // data 100 B in + 100 B out + 0 B of axes = 200.
  l.max_request_bytes = 200;
  EXPECT_TRUE(Run(ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {100}, 100)), l).ok());
  l.max_request_bytes = 199;
  absl::Status st = Run(ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {100}, 100)), l);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(),
              HasSubstr("plus 100 bytes of output; the limit is 199 (--max_request_bytes)"));
  // Inputs alone past it: rejected while decoding.
  l.max_request_bytes = 99;
  st = Run(ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {100}, 100)), l);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("--max_request_bytes"));
  // Unlimited: sums stop at int64's maximum without overflowing.
  EXPECT_TRUE(
      Run(ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {100}, 100)), RequestLimits::Unlimited())
          .ok());
}

TEST_F(LimitsTest, ShapeProductAndByteSizeOverflowAreInvalidArgument) {
  const RequestLimits unlimited = RequestLimits::Unlimited();
  struct Case {
    v1::DataType dtype;
    std::vector<int64_t> shape;
    const char* message;
  } cases[] = {
      {v1::DATA_TYPE_INT8, {int64_t{1} << 32, int64_t{1} << 32}, "more elements than fit in int64"},
      {v1::DATA_TYPE_INT8, {kI64Max, 2}, "more elements than fit in int64"},
      {v1::DATA_TYPE_INT8, {3, kI64Max / 2}, "more elements than fit in int64"},
      {v1::DATA_TYPE_INT64, {int64_t{1} << 61}, "byte size that does not fit in int64"},
      {v1::DATA_TYPE_COMPLEX128, {int64_t{1} << 60}, "byte size that does not fit in int64"},
      {v1::DATA_TYPE_STRING, {int64_t{1} << 60}, "byte size that does not fit in int64"},
      {v1::DATA_TYPE_INT8, {5, -1}, "is negative"},
      {v1::DATA_TYPE_INT8, {0, -1}, "is negative"},
      {v1::DATA_TYPE_INT8, {kI64Min}, "is negative"},
  };
  for (const Case& c : cases) {
    for (const RequestLimits* l : {&unlimited, static_cast<const RequestLimits*>(nullptr)}) {
      const absl::StatusOr<DecodedTensor> d =
          DecodeTensor(RawTensor(c.dtype, c.shape, 0), "inputs[0]", l);
      ASSERT_FALSE(d.ok());
      EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(d.status().message(), HasSubstr(c.message));
    }
  }
  // A zero dim makes the product 0 however large the others are, wherever
  // it is (found by the fuzzer: NumElements multiplied past int64 before
  // reaching a trailing 0). UBSan checks this in build-asan.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {0, kI64Max, kI64Max}, {kI64Max, kI64Max, 0}, {6912, kI64Max / 100, 0, 3}}) {
    for (const char* op : {"Reverse", "Roll"}) {
      v1::ExecuteRequest r = ReverseRequest(RawTensor(v1::DATA_TYPE_INT64, shape, 0));
      if (std::string(op) == "Roll") {
        r.clear_attrs();
        r.set_op("Roll");
        *r.mutable_inputs(1) = Int64s({5});
        *r.add_inputs() = Int64s({0});
      } else {
        *r.mutable_inputs(1) = Int64s({0, -1});
      }
      v1::ExecuteResponse response;
      ASSERT_TRUE(Run(r, RequestLimits(), &response).ok()) << op;
      EXPECT_EQ(response.outputs(0).shape_size(), static_cast<int>(shape.size()));
      EXPECT_TRUE(response.outputs(0).raw_data().empty());
    }
  }
}

TEST_F(LimitsTest, RollShiftSumsReduceModuloTheDimension) {
  // An axis listed several times gets the sum of its shifts; extreme shifts
  // must wrap without overflowing (UBSan would flag signed overflow).
  const std::vector<int64_t> data = {0, 1, 2, 3, 4, 5, 6};
  const std::vector<std::vector<int64_t>> shift_lists = {
      {kI64Max, kI64Max, kI64Max},
      {kI64Min, kI64Min, kI64Min},
      {kI64Max, kI64Min, kI64Max, kI64Min, 1},
      {kI64Min + 1, -1},
  };
  for (const auto& shifts : shift_lists) {
    v1::ExecuteRequest r;
    r.set_op("Roll");
    *r.add_inputs() = Int64s(data);
    *r.add_inputs() = Int64s(shifts);
    *r.add_inputs() = Int64s(std::vector<int64_t>(shifts.size(), 0));
    v1::ExecuteResponse response;
    ASSERT_TRUE(Run(r, RequestLimits(), &response).ok());
    __int128 total = 0;
    for (int64_t s : shifts) total += s;
    const int64_t n = static_cast<int64_t>(data.size());
    const int64_t k = static_cast<int64_t>(((total % n) + n) % n);
    ASSERT_EQ(response.outputs(0).int64_data_size(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(response.outputs(0).int64_data(static_cast<int>((i + k) % n)), data[i])
          << "shift sum " << static_cast<double>(total) << " at " << i;
    }
  }
  // A broadcast scalar shift of INT64_MIN over a repeated axis.
  v1::ExecuteRequest r;
  r.set_op("Roll");
  *r.add_inputs() = Int64s(data);
  *r.add_inputs() = Int64s({kI64Min}, /*scalar=*/true);
  *r.add_inputs() = Int64s({0, -1, 0});
  EXPECT_TRUE(Run(r).ok());
}

// ServerOptions::Validate, which Start calls: an in-process server gets the
// same checks as the binary's flags.
TEST(ServerOptionsTest, StartRefusesWhatCannotWork) {
  struct Row {
    const char* name;
    void (*change)(ServerOptions*);
    const char* message;  // empty: valid
  };
  const Row rows[] = {
      {"defaults", [](ServerOptions*) {}, ""},
      {"negative max_rank", [](ServerOptions* o) { o->call.limits.max_rank = -1; }, "--max_rank"},
      {"negative max_stream_bytes", [](ServerOptions* o) { o->call.limits.max_stream_bytes = -1; },
       "--max_stream_bytes must be >= 0"},
      {"tiny chunk", [](ServerOptions* o) { o->call.limits.stream_chunk_bytes = 4095; },
       "--stream_chunk_bytes must be at least 4096"},
      {"message too small for a chunk",
       [](ServerOptions* o) { o->grpc.max_message_bytes = (int64_t{64} << 10) + 4095; },
       "--max_message_bytes at least 4096 + 64 KiB"},
      {"zero http_max_connections", [](ServerOptions* o) { o->http.max_connections = 0; },
       "--http_max_connections must be >= 1 (or -1: derived)"},
      {"zero http_header_timeout",
       [](ServerOptions* o) { o->http.header_timeout = absl::ZeroDuration(); },
       "--http_header_timeout and --http_idle_timeout must be > 0"},
      {"negative http_min_body_rate", [](ServerOptions* o) { o->http.min_body_rate = -1; },
       "--http_min_body_rate must be >= 0"},
      {"sub-second http_body_rate_window",
       [](ServerOptions* o) { o->http.body_rate_window = absl::Milliseconds(500); },
       "--http_body_rate_window must be >= 1s"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ServerOptions options;
    row.change(&options);
    const absl::Status valid = options.Validate();
    if (std::string(row.message).empty()) {
      EXPECT_TRUE(valid.ok()) << valid;
      continue;
    }
    EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(valid.message()), ::testing::HasSubstr(row.message));
    options.grpc.port = 0;
    options.metrics_port = -1;
    auto server = TensorOpsServer::Start(options);
    EXPECT_EQ(server.status(), valid);
  }
  // A small message limit alone caps the chunk instead of failing.
  ServerOptions small;
  small.grpc.max_message_bytes = int64_t{1} << 20;
  EXPECT_TRUE(small.Validate().ok());
  EXPECT_EQ(small.EffectiveStreamChunkBytes(), (int64_t{1} << 20) - (int64_t{64} << 10));
}

TEST(LimitsServiceTest, TheServerEnforcesItsLimitsOverGrpc) {
  ServerOptions options;
  options.grpc.port = 0;
  options.metrics_port = -1;
  options.threads = 1;
  options.call.limits.max_tensor_bytes = 64;
  auto server = TensorOpsServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TensorOps::NewStub(channel);
  v1::ExecuteResponse response;
  {
    grpc::ClientContext ctx;
    grpc::Status st =
        stub->Execute(&ctx, ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {64}, 64)), &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    grpc::Status st =
        stub->Execute(&ctx, ReverseRequest(RawTensor(v1::DATA_TYPE_UINT8, {65}, 65)), &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(st.error_message(), HasSubstr("--max_tensor_bytes"));
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace tensorops
