// Execute and ModelInfer read and written as bytes (server/grpc/raw_unary.h)
// against the real binary, through a generic stub: the reply's bytes are
// protobuf's own serialisation of it (big outputs go out as their own slice,
// small ones through the message), a garbage body gets INVALID_ARGUMENT
// naming why, a tensor at the request limit passes and one byte more is
// refused, and a deadline that passes mid-call ends the call, not the server.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "tensorops/v1/tensorops.pb.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

constexpr char kExecute[] = "/tensorops.v1.TensorOps/Execute";
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";

struct Reply {
  grpc::Status status;
  std::string bytes;
};

// One unary call of `method` with `body` as it is on the wire.
Reply Call(const std::shared_ptr<grpc::Channel>& channel, const char* method,
           const std::string& body, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  Reply r;
  r.status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (r.status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      r.bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return r;
}

std::string Pattern(int64_t n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + (i >> 9));
  return s;
}

// Roll by 1 along axis 0 of a UINT8 vector: the last byte comes first.
std::string Rolled(const std::string& data) {
  return data.back() + data.substr(0, data.size() - 1);
}

v1::ExecuteRequest RollRequest(const std::string& data) {
  v1::ExecuteRequest req;
  req.set_op("Roll");
  v1::Tensor* t = req.add_inputs();
  t->set_dtype(v1::DATA_TYPE_UINT8);
  t->add_shape(static_cast<int64_t>(data.size()));
  t->set_raw_data(data);
  for (int i = 0; i < 2; ++i) {
    v1::Tensor* s = req.add_inputs();
    s->set_dtype(v1::DATA_TYPE_INT64);
    s->add_shape(1);
    s->add_int64_data(i == 0 ? 1 : 0);  // shift 1, axis 0
  }
  return req;
}

inference::ModelInferRequest InferRequest(const std::string& data) {
  inference::ModelInferRequest req;
  req.set_model_name("Roll");
  req.set_id("call-1");
  auto* in = req.add_inputs();
  in->set_name("data");
  in->set_datatype("UINT8");
  in->add_shape(static_cast<int64_t>(data.size()));
  req.add_raw_input_contents(data);
  for (const char* name : {"shift", "axes"}) {  // every input raw: shift 1, axis 0
    auto* s = req.add_inputs();
    s->set_name(name);
    s->set_datatype("INT64");
    s->add_shape(1);
    const int64_t v = name[0] == 's' ? 1 : 0;
    req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&v), sizeof v));
  }
  return req;
}

class UnaryBytesTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(const std::vector<std::string>& flags) {
    server_ = std::make_unique<testing::ServerProcess>();
    ASSERT_TRUE(server_->Start(TENSOROPS_SERVER_PATH, flags).ok());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ =
        grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
  }
  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(UnaryBytesTest, ExecuteRepliesAreProtobufsBytesSmallAndBig) {
  // Below, at and above the slice threshold (32 KiB), odd sizes included.
  for (int64_t n :
       {int64_t{64}, int64_t{32767}, int64_t{32768}, int64_t{65537}, int64_t{1} << 20}) {
    const std::string data = Pattern(n);
    Reply r = Call(channel_, kExecute, RollRequest(data).SerializeAsString());
    ASSERT_TRUE(r.status.ok()) << n << ": " << r.status.error_message();
    v1::ExecuteResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.bytes)) << n;
    EXPECT_EQ(resp.SerializeAsString(), r.bytes) << n;  // byte for byte protobuf's
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).dtype(), v1::DATA_TYPE_UINT8);
    EXPECT_EQ(resp.outputs(0).shape(0), n);
    EXPECT_TRUE(resp.outputs(0).raw_data() == Rolled(data)) << n;
  }
}

TEST_F(UnaryBytesTest, ModelInferRepliesAreProtobufsBytesSmallAndBig) {
  for (int64_t n : {int64_t{64}, int64_t{40000}, int64_t{1} << 20}) {
    const std::string data = Pattern(n);
    Reply r = Call(channel_, kModelInfer, InferRequest(data).SerializeAsString());
    ASSERT_TRUE(r.status.ok()) << n << ": " << r.status.error_message();
    inference::ModelInferResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.bytes)) << n;
    EXPECT_EQ(resp.SerializeAsString(), r.bytes) << n;
    EXPECT_EQ(resp.model_name(), "Roll");
    EXPECT_EQ(resp.id(), "call-1");
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    EXPECT_TRUE(resp.raw_output_contents(0) == Rolled(data)) << n;
  }
}

TEST_F(UnaryBytesTest, GarbageBodyIsInvalidArgumentNamingWhy) {
  for (const char* method : {kExecute, kModelInfer}) {
    Reply r = Call(channel_, method, "\x0f this is not protobuf");
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(r.status.error_message(), HasSubstr("is not a valid")) << method;
    EXPECT_THAT(r.status.error_message(), HasSubstr("at byte 0: wire type 7 is not valid"));
  }
  // A length that runs past the end names the field.
  std::string body = RollRequest(Pattern(100)).SerializeAsString();
  body.resize(body.size() - 60);
  Reply r = Call(channel_, kExecute, body);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("not a valid tensorops.v1.ExecuteRequest: inputs[0] (field 3)"));
  // And the server goes on answering.
  EXPECT_TRUE(Call(channel_, kExecute, RollRequest(Pattern(64)).SerializeAsString()).status.ok());
}

TEST_F(UnaryBytesTest, TensorAtTheRequestLimitPassesOneByteMoreIsRefused) {
  // Decoded inputs (data + two 8-byte INT64) plus the output: 2n + 16.
  constexpr int64_t kN = int64_t{4} << 20;
  Start({"--max_request_bytes=" + std::to_string(2 * kN + 16),
         "--max_tensor_bytes=" + std::to_string(kN + 1)});
  const std::string data = Pattern(kN);
  Reply ok = Call(channel_, kExecute, RollRequest(data).SerializeAsString());
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  v1::ExecuteResponse resp;
  ASSERT_TRUE(resp.ParseFromString(ok.bytes));
  EXPECT_TRUE(resp.outputs(0).raw_data() == Rolled(data));
  Reply over = Call(channel_, kExecute, RollRequest(Pattern(kN + 1)).SerializeAsString());
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(over.status.error_message(), HasSubstr("--max_request_bytes"));
}

TEST_F(UnaryBytesTest, DeadlinePassingMidCallEndsTheCallNotTheServer) {
  const std::string body = RollRequest(Pattern(int64_t{32} << 20)).SerializeAsString();
  Reply r = Call(channel_, kExecute, body, std::chrono::milliseconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The same call with time to spare succeeds.
  Reply ok = Call(channel_, kExecute, body);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
}

}  // namespace
}  // namespace tensorops
