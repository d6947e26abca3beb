// The gRPC door's own listener (server/grpc/grpc_listener.h) against the real
// binary: it outlives EMFILE (gRPC 1.51's accept loop did not), caps live
// connections, and the connections it hands to gRPC get the server's
// settings (stream limit, keepalive, idle and age limits, ping strikes,
// message size), over TCP and Unix sockets.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/checked_roll.h"
#include "tests/harness/http_get.h"
#include "tests/harness/raw_h2.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using testing::H2Frame;
using ::testing::HasSubstr;
using testing::RawH2Connection;

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A Roll call whose answer is checked: OK only when the reply is right.
grpc::Status SmallCall(const std::shared_ptr<grpc::Channel>& channel, int timeout_ms) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  v1::ExecuteResponse resp;
  grpc::Status st =
      v1::TensorOps::NewStub(channel)->Execute(&ctx, testing::CheckedRollRequest(), &resp);
  if (st.ok() && !testing::IsCheckedRollAnswer(resp)) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong reply");
  }
  return st;
}

// A script that runs the server under an RLIMIT_NOFILE of `nofile` (soft
// and hard: the server cannot raise it), so that the harness can start it
// like the binary itself.
class LimitedServer {
 public:
  explicit LimitedServer(int nofile) {
    char dir[] = "/tmp/tensorops-grpc-door-XXXXXX";
    dir_ = mkdtemp(dir);
    script_ = dir_ + "/server.sh";
    std::ofstream out(script_);
    out << "#!/bin/sh\nulimit -n " << nofile << " || exit 97\nexec '" << TENSOROPS_SERVER_PATH
        << "' \"$@\"\n";
    out.close();
    chmod(script_.c_str(), 0755);
  }
  ~LimitedServer() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return script_; }

 private:
  std::string dir_;
  std::string script_;
};

double Refused(const testing::ServerProcess& server, const std::string& reason) {
  return testing::ScrapeSample(server.metrics_port(), "tensorops_grpc_connections_refused_total",
                               {{"reason", reason}});
}

// Opens `n` connections that each send the HTTP/2 preface and then stay
// silent, as idle clients do (one the server closed at once may fail to
// send; it is kept all the same).
std::vector<RawH2Connection> OpenIdle(int port, int n) {
  std::vector<RawH2Connection> conns;
  for (int i = 0; i < n; ++i) {
    RawH2Connection c;
    if (!c.ConnectTcp(port).ok()) break;
    c.SendPreface().IgnoreError();
    conns.push_back(std::move(c));
  }
  return conns;
}

// How many of `conns` the server closed, once the last one (past any cap or
// limit) is seen closed (up to 5 s).
int ClosedByServer(std::vector<RawH2Connection>& conns) {
  if (conns.empty() || !conns.back().ClosedByPeer(5000)) return 0;
  int closed = 1;
  for (size_t i = 0; i + 1 < conns.size(); ++i) closed += conns[i].ClosedByPeer(2) ? 1 : 0;
  return closed;
}

// Waits until the server holds at most `fds` descriptors (up to 10 s).
bool WaitFdsAtMost(const testing::ServerProcess& server, int fds) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (server.OpenFds() <= fds) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The regression of grpc/grpc issues 16058 and 20418: with a cap the fd
// limit cannot hold, accept runs into EMFILE; once the flood is gone a new
// call must get through (with gRPC's own listener it timed out forever).
TEST(GrpcDoorTest, AcceptsAgainAfterEmfile) {
  LimitedServer script(300);
  auto server = testing::StartTestServer(script.path(), {"--grpc_max_connections=1000"});
  ASSERT_NE(server, nullptr);
  auto first = testing::NewTestChannel(server->address());
  ASSERT_TRUE(SmallCall(first, 5000).ok());
  first.reset();
  const int idle_fds = server->OpenFds();

  std::vector<RawH2Connection> flood = OpenIdle(server->port(), 400);
  ASSERT_EQ(flood.size(), 400u);
  // Accepted until the descriptors ran out; the rest closed at accept (with
  // gRPC's own listener they waited in the backlog, and so did every later
  // connection).
  const int closed = ClosedByServer(flood);
  EXPECT_GT(closed, 50) << "no connection was closed for want of descriptors";
  EXPECT_GE(server->OpenFds(), 290);

  flood.clear();
  ASSERT_TRUE(WaitFdsAtMost(*server, idle_fds + 5)) << server->OpenFds();
  const auto t0 = Clock::now();
  const grpc::Status st = SmallCall(testing::NewTestChannel(server->address()), 5000);
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  EXPECT_LT(Seconds(Clock::now() - t0), 2.0);
  EXPECT_GE(Refused(*server, "emfile"), 50);
  EXPECT_EQ(Refused(*server, "cap"), 0);
  // The gauge follows within a sweep (1 s).
  double open = -1;
  for (int i = 0; i < 30 && open != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    open = testing::ScrapeSample(server->metrics_port(), "tensorops_grpc_connections");
  }
  EXPECT_EQ(open, 0);
}

// The derived cap (server/fd_budget.h: 118 of 300 descriptors) keeps
// descriptors free: a flood past it is refused at the cap, never by EMFILE,
// and the metrics endpoint still answers during it.
TEST(GrpcDoorTest, DerivedCapKeepsDescriptorsFree) {
  LimitedServer script(300);
  auto server = testing::StartTestServer(script.path(), {});
  ASSERT_NE(server, nullptr);
  const int idle_fds = server->OpenFds();
  std::vector<RawH2Connection> flood = OpenIdle(server->port(), 200);
  ASSERT_EQ(flood.size(), 200u);
  EXPECT_EQ(ClosedByServer(flood), 200 - 118);
  EXPECT_EQ(testing::ScrapeSample(server->metrics_port(), "tensorops_grpc_connections"), 118);
  EXPECT_EQ(Refused(*server, "cap"), 200 - 118);
  EXPECT_LT(server->OpenFds(), 300 - 50);
  // At the cap a new caller fails at once (a retrying client or balancer
  // goes elsewhere).
  const auto t0 = Clock::now();
  const grpc::Status refused = SmallCall(testing::NewTestChannel(server->address()), 5000);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_LT(Seconds(Clock::now() - t0), 2.0);
  flood.clear();
  ASSERT_TRUE(WaitFdsAtMost(*server, idle_fds + 5)) << server->OpenFds();
  EXPECT_TRUE(SmallCall(testing::NewTestChannel(server->address()), 5000).ok());
  EXPECT_EQ(Refused(*server, "emfile"), 0);
}

TEST(GrpcDoorTest, CapRefusesTheNinthAndAdmitsOnceOthersLeave) {
  auto server = testing::StartTestServer(TENSOROPS_SERVER_PATH, {"--grpc_max_connections=8"});
  ASSERT_NE(server, nullptr);
  std::vector<std::shared_ptr<grpc::Channel>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(testing::NewTestChannel(server->address()));
    ASSERT_TRUE(
        held.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  }
  EXPECT_EQ(testing::ScrapeSample(server->metrics_port(), "tensorops_grpc_connections"), 8);
  const auto t0 = Clock::now();
  const grpc::Status ninth = SmallCall(testing::NewTestChannel(server->address()), 5000);
  EXPECT_EQ(ninth.error_code(), grpc::StatusCode::UNAVAILABLE) << ninth.error_message();
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);
  EXPECT_GE(Refused(*server, "cap"), 1);
  // The held channels still work.
  EXPECT_TRUE(SmallCall(held[0], 5000).ok());

  held.resize(6);  // two channels closed: their connections end
  grpc::Status st;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  do {
    st = SmallCall(testing::NewTestChannel(server->address()), 5000);
    if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (!st.ok() && Clock::now() < deadline);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_LT(Seconds(Clock::now() - (deadline - std::chrono::seconds(5))), 1.0);
}

// A stock gRPC client queues calls past --grpc_max_concurrent_streams (they
// wait, they do not fail), and runs them as streams end.
TEST(GrpcDoorTest, StreamLimitQueuesCallsOfAStockClient) {
  auto server =
      testing::StartTestServer(TENSOROPS_SERVER_PATH, {"--grpc_max_concurrent_streams=4"});
  ASSERT_NE(server, nullptr);
  auto channel = testing::NewTestChannel(server->address());
  ASSERT_TRUE(SmallCall(channel, 5000).ok());
  auto stub = v1::TensorOps::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<
      grpc::ClientReaderWriter<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>>>
      streams;
  for (int i = 0; i < 4; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->ExecuteStream(contexts.back().get()));
  }
  // Let the four streams reach the server.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const grpc::Status queued = SmallCall(channel, 1000);
  EXPECT_EQ(queued.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << queued.error_message();
  // Another connection is not held up by this one's streams.
  EXPECT_TRUE(SmallCall(testing::NewTestChannel(server->address()), 5000).ok());
  contexts[0]->TryCancel();
  EXPECT_TRUE(SmallCall(channel, 5000).ok());
  for (size_t i = 1; i < contexts.size(); ++i) contexts[i]->TryCancel();
  for (auto& s : streams) s->Finish().IgnoreError();
}

// The server's side of the same limit, to a client that ignores it: the
// SETTINGS advertise it, and a stream past it is refused.
TEST(GrpcDoorTest, StreamsPastTheLimitAreRefused) {
  auto server =
      testing::StartTestServer(TENSOROPS_SERVER_PATH, {"--grpc_max_concurrent_streams=4"});
  ASSERT_NE(server, nullptr);
  RawH2Connection c;
  ASSERT_TRUE(c.ConnectTcp(server->port()).ok());
  ASSERT_TRUE(c.SendPreface().ok());
  absl::StatusOr<H2Frame> settings = c.ReadUntil(testing::kH2Settings, 5000);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(testing::H2SettingValue(*settings, testing::kH2SettingsMaxConcurrentStreams), 4);
  ASSERT_TRUE(c.SendSettingsAck().ok());
  // Wait for the server's ACK of ours: from then on it has seen ours too.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (uint32_t id = 1; id <= 11; id += 2) {
    ASSERT_TRUE(c.SendRequestHeaders(id, "/tensorops.v1.TensorOps/ExecuteStream").ok());
  }
  // gRPC 1.51 ends a connection whose peer opens a stream past the limit
  // it acknowledged (a protocol error); either way no fifth stream is served.
  absl::StatusOr<H2Frame> frame = c.ReadUntil(testing::kH2Goaway, 5000);
  if (frame.ok()) {
    EXPECT_NE(testing::H2GoawayError(*frame), 0) << testing::H2GoawayDebug(*frame);
  } else {
    EXPECT_TRUE(absl::IsUnavailable(frame.status())) << frame.status();
  }
}

// Connections handed over with AddInsecureChannelFromFd get the server's
// channel arguments: keepalive pings, the idle limit, the age limit, ping
// strikes and the message size limit.
TEST(GrpcDoorTest, HandedOverConnectionsGetKeepaliveAndIdleLimit) {
  auto server = testing::StartTestServer(
      TENSOROPS_SERVER_PATH,
      {"--keepalive_time=500ms", "--max_connection_idle=2s", "--max_connection_age=0"});
  ASSERT_NE(server, nullptr);
  RawH2Connection c;
  ASSERT_TRUE(c.ConnectTcp(server->port()).ok());
  ASSERT_TRUE(c.SendPreface().ok());
  const auto t0 = Clock::now();
  absl::StatusOr<H2Frame> ping = c.ReadUntil(testing::kH2Ping, 5000);
  ASSERT_TRUE(ping.ok()) << ping.status();
  EXPECT_EQ(ping->flags & testing::kH2FlagAck, 0);
  const double ping_s = Seconds(Clock::now() - t0);
  EXPECT_GT(ping_s, 0.3);
  EXPECT_LT(ping_s, 1.5);
  absl::StatusOr<H2Frame> goaway = c.ReadUntil(testing::kH2Goaway, 5000);
  ASSERT_TRUE(goaway.ok()) << goaway.status();
  const double idle_s = Seconds(Clock::now() - t0);
  EXPECT_GT(idle_s, 1.5);
  EXPECT_LT(idle_s, 3.5);
  // gRPC 1.51's idle filter says "enter idle" (error code INTERNAL_ERROR);
  // other versions word it differently: the time is what is checked.
  std::printf("idle GOAWAY after %.2f s: code %lld, \"%s\"\n", idle_s,
              static_cast<long long>(testing::H2GoawayError(*goaway)),
              testing::H2GoawayDebug(*goaway).c_str());
}

// gRPC's own listener closed a connection without the client's SETTINGS
// after its handshake timeout (120 s); a handed-over connection has none,
// and it is the keepalive ping, unanswered, that ends a silent one.
TEST(GrpcDoorTest, SilentConnectionEndsAtTheUnansweredKeepalive) {
  auto server = testing::StartTestServer(TENSOROPS_SERVER_PATH,
                                         {"--keepalive_time=500ms", "--keepalive_timeout=500ms"});
  ASSERT_NE(server, nullptr);
  RawH2Connection c;
  ASSERT_TRUE(c.ConnectTcp(server->port()).ok());
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.ClosedByPeer(5000));
  const double closed_s = Seconds(Clock::now() - t0);
  EXPECT_GT(closed_s, 0.8);
  EXPECT_LT(closed_s, 3.0);
}

TEST(GrpcDoorTest, HandedOverConnectionsGetTheAgeLimit) {
  auto server = testing::StartTestServer(
      TENSOROPS_SERVER_PATH,
      {"--max_connection_age=1s", "--max_connection_age_grace=1s", "--max_connection_idle=0"});
  ASSERT_NE(server, nullptr);
  RawH2Connection c;
  ASSERT_TRUE(c.ConnectTcp(server->port()).ok());
  ASSERT_TRUE(c.SendPreface().ok());
  const auto t0 = Clock::now();
  absl::StatusOr<H2Frame> goaway = c.ReadUntil(testing::kH2Goaway, 5000);
  ASSERT_TRUE(goaway.ok()) << goaway.status();
  const double age_s = Seconds(Clock::now() - t0);
  EXPECT_GT(age_s, 0.8);
  EXPECT_LT(age_s, 2.5);
  EXPECT_EQ(testing::H2GoawayError(*goaway), 0);  // NO_ERROR: a graceful GOAWAY
  // After the grace (1 s) the connection is closed.
  EXPECT_TRUE(c.ClosedByPeer(3000));
}

TEST(GrpcDoorTest, PingFloodGetsTooManyPings) {
  auto server = testing::StartTestServer(TENSOROPS_SERVER_PATH, {});
  ASSERT_NE(server, nullptr);
  RawH2Connection c;
  ASSERT_TRUE(c.ConnectTcp(server->port()).ok());
  ASSERT_TRUE(c.SendPreface().ok());
  absl::StatusOr<H2Frame> settings = c.ReadUntil(testing::kH2Settings, 5000);
  ASSERT_TRUE(settings.ok());
  ASSERT_TRUE(c.SendSettingsAck().ok());
  absl::StatusOr<H2Frame> goaway = absl::DeadlineExceededError("no GOAWAY");
  for (int i = 0; i < 20 && !goaway.ok(); ++i) {
    if (!c.SendPing(i).ok()) break;
    goaway = c.ReadUntil(testing::kH2Goaway, 50);
  }
  ASSERT_TRUE(goaway.ok()) << goaway.status();
  EXPECT_EQ(testing::H2GoawayError(*goaway), testing::kH2EnhanceYourCalm);
  EXPECT_THAT(testing::H2GoawayDebug(*goaway), HasSubstr("too_many_pings"));
  // Pings at the permitted interval (10 s) would take too long here; a
  // connection with calls in between is never struck (see docs/server.md).
}

TEST(GrpcDoorTest, HandedOverConnectionsGetTheMessageSizeLimit) {
  auto server = testing::StartTestServer(TENSOROPS_SERVER_PATH, {"--max_message_bytes=200000"});
  ASSERT_NE(server, nullptr);
  v1::ExecuteRequest req;
  req.set_op("Reverse");
  v1::Tensor* data = req.add_inputs();
  data->set_dtype(v1::DATA_TYPE_UINT8);
  data->add_shape(300000);
  data->set_raw_data(std::string(300000, 'x'));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ExecuteResponse resp;
  const grpc::Status st =
      v1::TensorOps::NewStub(testing::NewTestChannel(server->address()))->Execute(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
}

// --listen with a Unix socket: served by the same listener (and cap), the
// socket file removed at exit.
TEST(GrpcDoorTest, UnixSocketServedCappedAndRemoved) {
  char dir[] = "/tmp/tensorops-grpc-unix-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/grpc.sock";
  auto server = testing::StartTestServer(TENSOROPS_SERVER_PATH,
                                         {"--listen=unix:" + path, "--grpc_max_connections=2"});
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(SmallCall(testing::NewTestChannel("unix:" + path), 5000).ok());
  // Two connections held (one TCP, one Unix): a third on either is refused.
  auto tcp = testing::NewTestChannel(server->address());
  auto unix_channel = testing::NewTestChannel("unix:" + path);
  ASSERT_TRUE(SmallCall(tcp, 5000).ok());
  ASSERT_TRUE(SmallCall(unix_channel, 5000).ok());
  RawH2Connection third;
  ASSERT_TRUE(third.ConnectUnix(path).ok());
  EXPECT_TRUE(third.ClosedByPeer(5000));
  EXPECT_EQ(server->Stop(), 0);
  struct stat st;
  EXPECT_NE(lstat(path.c_str(), &st), 0) << path << " left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tensorops
