// The SDK's channel over several replicas (issue 48), against stand-in
// servers on 127.0.0.1 (generic service, stand_in_server.h) that serve
// grpc.health.v1 too, through one multi-address target
// ("ipv4:127.0.0.1:A,127.0.0.1:B,..."), as a dns:/// name with several
// addresses resolves:
//   - round_robin (the default) spreads calls evenly over every replica;
//   - a replica whose tensorops.v1.TensorOps health turns NOT_SERVING (a
//     draining server) gets no new call; back to SERVING, it gets calls again;
//   - with health_check_service empty, the NOT_SERVING replica still gets
//     calls (the check is what skips it);
//   - bad balancing options are refused, naming the field.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/client/stand_in_server.h"

namespace tensorops {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kService[] = "tensorops.v1.TensorOps";

class BalancingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Before the servers are built: each then serves grpc.health.v1.
    grpc::EnableDefaultHealthCheckService(true);
    for (int i = 0; i < 3; ++i) {
      // FAILED_PRECONDITION: no retry, one attempt per call, counted.
      replicas_.push_back(
          std::make_unique<testing::StandInServer>(grpc::StatusCode::FAILED_PRECONDITION));
      ASSERT_TRUE(replicas_.back()->Start());
      SetServing(i, true);
    }
  }

  void SetServing(int i, bool serving) {
    replicas_[i]->health()->SetServingStatus(kService, serving);
  }

  std::unique_ptr<Client> Connect(const std::string& health_service = kService) {
    ClientOptions options;
    std::vector<std::string> addresses;
    for (const auto& r : replicas_) addresses.push_back(r->address());
    options.target = absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
    options.health_check_service = health_service;
    options.retry.enabled = false;
    options.default_deadline = std::chrono::seconds(10);
    auto client = Client::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // `n` Rolls, one after another; each must reach a replica.
  void Calls(Client* client, int n) {
    const std::vector<Tensor> inputs = {Tensor(std::vector<int32_t>{1, 2, 3}, {3}),
                                        Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(0)};
    for (int k = 0; k < n; ++k) {
      const absl::Status st = client->Execute("Roll", {}, inputs).status();
      ASSERT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    }
  }

  std::vector<int> Counts() const {
    std::vector<int> out;
    for (const auto& r : replicas_) out.push_back(r->calls());
    return out;
  }

  // Calls until replica `i` gets `want_calls` (true) or none (false) of 30
  // calls in a row; false if that takes over 10 s.
  bool UntilReplica(Client* client, int i, bool want_calls) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      const int before = replicas_[i]->calls();
      Calls(client, 30);
      if ((replicas_[i]->calls() > before) == want_calls) return true;
    }
    return false;
  }

  std::vector<std::unique_ptr<testing::StandInServer>> replicas_;
};

TEST_F(BalancingTest, RoundRobinSpreadsCallsEvenly) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Calls(client.get(), 300);
  const std::vector<int> n = Counts();
  for (int c : n) EXPECT_NEAR(c, 100, 10) << absl::StrJoin(n, ", ");
}

TEST_F(BalancingTest, NotServingReplicaGetsNoCallsUntilServingAgain) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Calls(client.get(), 30);
  SetServing(1, false);
  // The Watch brings NOT_SERVING within a round trip; the calls before it
  // lands may still reach replica 1.
  ASSERT_TRUE(UntilReplica(client.get(), 1, false)) << "replica 1 kept getting calls";
  const std::vector<int> before = Counts();
  Calls(client.get(), 200);
  const std::vector<int> after = Counts();
  EXPECT_EQ(after[1], before[1]) << "a NOT_SERVING replica got calls";
  EXPECT_NEAR(after[0] - before[0], 100, 5);
  EXPECT_NEAR(after[2] - before[2], 100, 5);
  SetServing(1, true);
  EXPECT_TRUE(UntilReplica(client.get(), 1, true)) << "replica 1 got no call once SERVING";
}

TEST_F(BalancingTest, WithoutTheHealthCheckNotServingReplicasStillGetCalls) {
  SetServing(1, false);
  auto client = Connect(/*health_service=*/"");
  ASSERT_NE(client, nullptr);
  Calls(client.get(), 90);
  EXPECT_NEAR(Counts()[1], 30, 3);
}

TEST(BalancingOptionsTest, BadOptionsAreRefusedNamingTheField) {
  ClientOptions options;
  options.target = "127.0.0.1:1";
  options.health_check_service = "a\"b";
  auto c = Client::Create(options);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("health_check_service"), std::string::npos) << c.status();
  options.health_check_service = kService;
  options.max_reconnect_backoff = std::chrono::milliseconds(0);
  c = Client::Create(options);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("max_reconnect_backoff"), std::string::npos) << c.status();
  options.max_reconnect_backoff = std::chrono::seconds(2);
  options.min_time_between_resolutions = std::chrono::milliseconds(-1);
  c = Client::Create(options);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("min_time_between_resolutions"), std::string::npos)
      << c.status();
}

}  // namespace
}  // namespace tensorops
