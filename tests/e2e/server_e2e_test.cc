// End to end: the real tensorops-server binary on a free 127.0.0.1 port,
// called through a real channel, stopped by PID.
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class ServerE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    // A failure here would only skip the tests; SetUp turns it into a failure.
    *start_status_ = server_->Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0"});
  }
  static void TearDownTestSuite() {
    const int status = server_->Stop();
    // SIGTERM is a clean shutdown: exit status 0.
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    delete server_;
  }
  void SetUp() override {
    ASSERT_TRUE(start_status_->ok()) << *start_status_;
    stub_ = v1::TensorOps::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  grpc::Status Call(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Execute(&ctx, req, resp);
  }

  static testing::ServerProcess* server_;
  static absl::Status* start_status_;
  std::unique_ptr<v1::TensorOps::Stub> stub_;
};
testing::ServerProcess* ServerE2ETest::server_ = nullptr;
absl::Status* ServerE2ETest::start_status_ = new absl::Status();

v1::Tensor Int32Tensor(std::vector<int64_t> shape, std::vector<int32_t> values) {
  v1::Tensor t;
  t.set_dtype(v1::DATA_TYPE_INT32);
  for (int64_t d : shape) t.add_shape(d);
  for (int32_t v : values) t.add_int32_data(v);
  return t;
}

v1::Tensor Int64Tensor(std::vector<int64_t> shape, std::vector<int64_t> values) {
  v1::Tensor t;
  t.set_dtype(v1::DATA_TYPE_INT64);
  for (int64_t d : shape) t.add_shape(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

TEST_F(ServerE2ETest, RollSpecExample2) {
  v1::ExecuteRequest req;
  req.set_op("Roll");
  *req.add_inputs() = Int32Tensor({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  *req.add_inputs() = Int64Tensor({2}, {-1, 2});
  *req.add_inputs() = Int64Tensor({2}, {0, 1});
  v1::ExecuteResponse resp;
  ASSERT_TRUE(Call(req, &resp).ok());
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).dtype(), v1::DATA_TYPE_INT32);
  EXPECT_THAT(resp.outputs(0).shape(), ElementsAre(4, 3));
  EXPECT_THAT(resp.outputs(0).int32_data(),
              ElementsAreArray({5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1}));
}

TEST_F(ServerE2ETest, ReverseIndexAndMask) {
  for (const char* mode : {"index", "mask"}) {
    SCOPED_TRACE(mode);
    v1::ExecuteRequest req;
    req.set_op("Reverse");
    (*req.mutable_attrs()->mutable_fields())["mode"].set_string_value(mode);
    *req.add_inputs() = Int32Tensor({2, 3}, {1, 2, 3, 4, 5, 6});
    if (std::string(mode) == "index") {
      *req.add_inputs() = Int64Tensor({1}, {-1});
    } else {
      v1::Tensor mask;
      mask.set_dtype(v1::DATA_TYPE_BOOL);
      mask.add_shape(2);
      mask.add_bool_data(false);
      mask.add_bool_data(true);
      *req.add_inputs() = mask;
    }
    v1::ExecuteResponse resp;
    ASSERT_TRUE(Call(req, &resp).ok());
    EXPECT_THAT(resp.outputs(0).int32_data(), ElementsAreArray({3, 2, 1, 6, 5, 4}));
  }
}

TEST_F(ServerE2ETest, ReverseSequenceBothFlavoursRawEncoding) {
  // data [2 batch, 3 time] as raw little-endian floats; the reply is raw too.
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};
  struct Case {
    const char* op;
    const char* batch_attr;
    const char* seq_attr;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {"ReverseSequence", "batch_axis", "seq_axis", {2, 1, 3, 6, 5, 4}},
      {"onnx.ReverseSequence", "batch_axis", "time_axis", {2, 1, 3, 6, 5, 4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    v1::ExecuteRequest req;
    req.set_op(c.op);
    (*req.mutable_attrs()->mutable_fields())[c.batch_attr].set_number_value(0);
    (*req.mutable_attrs()->mutable_fields())[c.seq_attr].set_number_value(1);
    v1::Tensor* t = req.add_inputs();
    t->set_dtype(v1::DATA_TYPE_FLOAT32);
    t->add_shape(2);
    t->add_shape(3);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), 24));
    *req.add_inputs() = Int64Tensor({2}, {2, 3});
    v1::ExecuteResponse resp;
    grpc::Status st = Call(req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const std::string& raw = resp.outputs(0).raw_data();
    ASSERT_EQ(raw.size(), 24u);
    std::vector<float> got(6);
    std::memcpy(got.data(), raw.data(), 24);
    EXPECT_EQ(got, c.expected);
  }
}

TEST_F(ServerE2ETest, ListOpsDescribesEveryOp) {
  grpc::ClientContext ctx;
  v1::ListOpsResponse resp;
  ASSERT_TRUE(stub_->ListOps(&ctx, v1::ListOpsRequest(), &resp).ok());
  std::vector<std::string> names;
  for (const auto& op : resp.ops()) names.push_back(op.name());
  EXPECT_THAT(names, ElementsAre("Reverse", "ReverseSequence", "Roll", "onnx.ReverseSequence"));
  const v1::OpInfo& rs = resp.ops(1);
  EXPECT_THAT(rs.aliases(), ElementsAre("ReverseSequence-1"));
  ASSERT_EQ(rs.attributes_size(), 2);
  EXPECT_EQ(rs.attributes(0).name(), "batch_axis");
  EXPECT_EQ(rs.attributes(0).default_value(), "0");
  EXPECT_EQ(rs.inputs(0).min_rank(), 2);
  EXPECT_EQ(rs.inputs(0).allowed_types_size(), 18);
  // Output inference: every op's output is like its data input.
  for (const auto& op : resp.ops()) {
    ASSERT_EQ(op.outputs_size(), 1) << op.name();
    EXPECT_EQ(op.outputs(0).like_input(), op.inputs(0).name()) << op.name();
  }
}

TEST_F(ServerE2ETest, ErrorsKeepTheirCodeAndNameTheField) {
  v1::ExecuteRequest req;
  req.set_op("Roll");
  *req.add_inputs() = Int32Tensor({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  *req.add_inputs() = Int64Tensor({1}, {1});
  *req.add_inputs() = Int64Tensor({2}, {0, 3});
  v1::ExecuteResponse resp;
  grpc::Status st = Call(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("axes[1] = 3 is out of range [-2, 1]"));

  req.set_op("Transpose");
  st = Call(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(st.error_message(), HasSubstr("Roll"));

  req.set_op("Roll");
  req.mutable_inputs(0)->add_int32_data(13);
  st = Call(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("inputs[0].int32_data"));
}

}  // namespace
}  // namespace tensorops
