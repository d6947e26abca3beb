// A call the SDK makes while its only replica's health watch has just
// failed. gRPC's memory quota on a server under a burst resets streams, the
// watch among them (memory_limit_e2e_test); the channel then counts the
// replica down until a new watch answers (gRPC's health client retries after
// ~1 s), and a call picked in between fails UNAVAILABLE "health check call
// failed" although no server saw it. The SDK resends it (client/retry.cc).
//
// The stand-in here (a GenericStandIn: no tensorops code) fails the
// first Watch with RESOURCE_EXHAUSTED, as the reclaimer's RST_STREAM looks
// to the client, answers later ones SERVING, every Execute OK with an empty
// reply and every ExecuteStream FAILED_PRECONDITION (proof it arrived).
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/client/stand_in_server.h"

namespace tensorops {
namespace {

class FlakyWatchServer final : public testing::GenericStandIn {
 public:
  ~FlakyWatchServer() override { Stop(); }
  int watches() const { return watches_.load(); }
  int executes() const { return executes_.load(); }
  int streams() const { return streams_.load(); }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() == "/grpc.health.v1.Health/Watch") {
      if (watches_++ == 0) return new Finished(grpc::Status(grpc::RESOURCE_EXHAUSTED, "reset"));
      return new Serving();
    }
    if (ctx->method() == "/tensorops.v1.TensorOps/Execute") {
      ++executes_;
      return new EmptyReply();
    }
    if (ctx->method() == "/tensorops.v1.TensorOps/ExecuteStream") {
      ++streams_;
      return new Finished(grpc::Status(grpc::FAILED_PRECONDITION, "stand-in"));
    }
    return new Finished(grpc::Status(grpc::UNIMPLEMENTED, ""));
  }

 private:
  class Finished final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Finished(grpc::Status s) { Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  // grpc.health.v1.HealthCheckResponse{status: SERVING}, then open until
  // the client goes.
  class Serving final : public grpc::ServerGenericBidiReactor {
   public:
    Serving() {
      const std::string serving("\x08\x01", 2);
      grpc::Slice slice(serving);
      reply_ = grpc::ByteBuffer(&slice, 1);
      StartWrite(&reply_);
    }
    void OnWriteDone(bool) override {}
    void OnCancel() override { Finish(grpc::Status::CANCELLED); }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer reply_;
  };
  // An empty tensorops.v1.ExecuteResponse (no outputs).
  class EmptyReply final : public grpc::ServerGenericBidiReactor {
   public:
    EmptyReply() {
      grpc::Slice slice(std::string{});
      reply_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer reply_;
  };

  std::atomic<int> watches_{0};
  std::atomic<int> executes_{0};
  std::atomic<int> streams_{0};
};

TEST(HealthResendTest, ACallPickedWhileTheWatchRestartsIsResentNotFailed) {
  FlakyWatchServer server;
  ASSERT_TRUE(server.Start());
  ClientOptions options;
  options.target = server.address();  // health checking is on by default
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>{1, 2, 3}, {3}),
                                      Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
  const auto t0 = std::chrono::steady_clock::now();
  const ExecuteResult r = (*client)->Execute("Roll", {}, inputs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status() << " after " << s << " s";
  EXPECT_TRUE(r->empty());
  EXPECT_GE(server.watches(), 2) << "the first watch failed, a later one answered";
  EXPECT_EQ(server.executes(), 1) << "the call reached the server once";
}

// A streamed call that no server saw is sent again too (its inputs are
// read again; nothing reached its output).
TEST(HealthResendTest, AStreamPickedWhileTheWatchRestartsIsResent) {
  FlakyWatchServer server;
  ASSERT_TRUE(server.Start());
  ClientOptions options;
  options.target = server.address();
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>{1, 2, 3}, {3}),
                                      Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
  CallOptions call;
  call.transport = Transport::kStream;
  const ExecuteResult r = (*client)->Execute("Roll", {}, inputs, call);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(server.streams(), 1);
}

TEST(HealthResendTest, WithRetriesOffTheCallFailsAsGrpcSaysIt) {
  FlakyWatchServer server;
  ASSERT_TRUE(server.Start());
  ClientOptions options;
  options.target = server.address();
  options.retry.enabled = false;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>{1, 2, 3}, {3}),
                                      Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
  const ExecuteResult r = (*client)->Execute("Roll", {}, inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(server.executes(), 0);
}

}  // namespace
}  // namespace tensorops
