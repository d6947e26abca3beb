// server/grpc/grpc_listener.h without gRPC: the hand-off keeps (and closes)
// the descriptors as gRPC would, so the cap, the count, EMFILE and the
// sockets can be checked exactly.
#include "server/grpc/grpc_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

// What gRPC does with a handed-over descriptor, as far as the listener can
// see: keeps it open until the connection ends, then closes it.
class FakeGrpc {
 public:
  std::function<void(int)> HandOff() {
    return [this](int fd) {
      absl::MutexLock lock(&mu_);
      fds_.push_back(fd);
    };
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return fds_.size();
  }
  bool WaitFor(size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Ends `n` connections (the oldest first).
  void Close(size_t n) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < n && !fds_.empty(); ++i) {
      close(fds_.front());
      fds_.erase(fds_.begin());
    }
  }
  // The most recent connection's descriptor.
  int Back() {
    absl::MutexLock lock(&mu_);
    return fds_.empty() ? -1 : fds_.back();
  }
  void Forget(int fd) {
    absl::MutexLock lock(&mu_);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  }
  ~FakeGrpc() { Close(fds_.size()); }

 private:
  absl::Mutex mu_;
  std::vector<int> fds_;
};

int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the peer closed `fd` within `timeout_ms`.
bool ClosedByPeer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

std::unique_ptr<GrpcListener> StartOn(const std::string& address, int64_t cap, FakeGrpc* grpc) {
  GrpcListener::Options options;
  options.addresses = {address};
  options.max_connections = cap;
  options.hand_off = grpc->HandOff();
  absl::StatusOr<std::unique_ptr<GrpcListener>> l = GrpcListener::Start(std::move(options));
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *std::move(l) : nullptr;
}

TEST(GrpcListenerTest, CapsLiveConnectionsAndCountsTheOnesGrpcClosed) {
  FakeGrpc grpc;
  auto l = StartOn("127.0.0.1:0", 5, &grpc);
  ASSERT_NE(l, nullptr);
  ASSERT_GT(l->port(0), 0);
  std::vector<int> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(ConnectTcp(l->port(0)));
  ASSERT_TRUE(grpc.WaitFor(5));
  EXPECT_EQ(l->connections(), 5);
  // The sixth is closed at accept.
  const int sixth = ConnectTcp(l->port(0));
  EXPECT_TRUE(ClosedByPeer(sixth, 5000));
  EXPECT_EQ(l->refused_at_cap(), 1);
  EXPECT_EQ(grpc.size(), 5u);
  // Two connections end (gRPC closes their descriptors): two new ones fit.
  grpc.Close(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past the cap's sweep interval
  const int a = ConnectTcp(l->port(0));
  const int b = ConnectTcp(l->port(0));
  ASSERT_TRUE(grpc.WaitFor(5));
  EXPECT_FALSE(ClosedByPeer(a, 100));
  EXPECT_FALSE(ClosedByPeer(b, 100));
  EXPECT_EQ(l->connections(), 5);
  EXPECT_EQ(l->refused_at_cap(), 1);
  l->Stop();
  // Stopped: nothing listens any more.
  EXPECT_EQ(ConnectTcp(l->port(0)), -1);
  for (int fd : clients) close(fd);
  for (int fd : {sixth, a, b}) close(fd);
}

// A descriptor number gRPC closed and the process reused for another file
// is not a live connection (the inode tells).
TEST(GrpcListenerTest, ReusedDescriptorNumberIsNotCounted) {
  FakeGrpc grpc;
  auto l = StartOn("127.0.0.1:0", 100, &grpc);
  ASSERT_NE(l, nullptr);
  const int client = ConnectTcp(l->port(0));
  ASSERT_TRUE(grpc.WaitFor(1));
  const int fd = grpc.Back();
  grpc.Forget(fd);
  close(fd);
  // The lowest free number: the one just closed.
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(file, fd);
  EXPECT_EQ(l->SweepForTest(), 0);
  close(file);
  close(client);
}

// Out of descriptors: pending connections are closed (not left waiting),
// nothing is handed over, and accepting resumes once descriptors are free.
TEST(GrpcListenerTest, OutlivesEmfile) {
  FakeGrpc grpc;
  auto l = StartOn("127.0.0.1:0", 1000, &grpc);
  ASSERT_NE(l, nullptr);
  // The clients' sockets first: connect(2) takes no new descriptor.
  std::vector<int> clients;
  for (int i = 0; i < 40; ++i) clients.push_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int spare_client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // The numbers the next 10 descriptors would get (the lowest free ones):
  // a limit just above the highest leaves room for exactly 10 connections.
  std::vector<int> probes;
  for (int i = 0; i < 10; ++i) probes.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int highest = *std::max_element(probes.begin(), probes.end());
  for (int fd : probes) close(fd);
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest + 1);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(l->port(0)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int fd : clients) {
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  EXPECT_TRUE(ClosedByPeer(clients.back(), 5000));
  int closed = 0;
  for (int fd : clients) closed += ClosedByPeer(fd, 2) ? 1 : 0;
  EXPECT_EQ(grpc.size(), 10u);
  EXPECT_EQ(static_cast<size_t>(closed), clients.size() - grpc.size());
  EXPECT_EQ(l->refused_emfile(), closed);
  // Descriptors free again: the next connection is handed over.
  grpc.Close(grpc.size());
  ASSERT_EQ(connect(spare_client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_TRUE(grpc.WaitFor(1));
  EXPECT_FALSE(ClosedByPeer(spare_client, 100));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  for (int fd : clients) close(fd);
  close(spare_client);
}

// The cost of a sweep (fstat per live connection), which runs at accept
// time near the cap and once a second.
TEST(GrpcListenerTest, SweepOfAThousandConnectionsIsCheap) {
  rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur < 2200) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 4096);
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2200) GTEST_SKIP() << "needs 2,200 descriptors";
  }
  FakeGrpc grpc;
  auto l = StartOn("127.0.0.1:0", 2000, &grpc);
  ASSERT_NE(l, nullptr);
  std::vector<int> clients;
  for (int i = 0; i < 1000; ++i) clients.push_back(ConnectTcp(l->port(0)));
  ASSERT_TRUE(grpc.WaitFor(1000));
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) EXPECT_EQ(l->SweepForTest(), 1000);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      kRounds;
  std::printf("sweep of 1000 live connections: %.0f us\n", us);
  EXPECT_LT(us, 20000);
  for (int fd : clients) close(fd);
}

TEST(GrpcListenerTest, UnixSocketReplacesAStaleOneAndIsRemovedAtStop) {
  char dir[] = "/tmp/tensorops-listener-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/s.sock";
  // A socket file left by an earlier run.
  {
    const int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    ASSERT_EQ(bind(stale, reinterpret_cast<sockaddr*>(&un), sizeof(un)), 0);
    close(stale);
  }
  FakeGrpc grpc;
  auto l = StartOn("unix:" + path, 10, &grpc);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->port(0), 0);
  const int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path.data(), path.size());
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&un), sizeof(un)), 0);
  EXPECT_TRUE(grpc.WaitFor(1));
  l->Stop();
  struct stat st;
  EXPECT_NE(lstat(path.c_str(), &st), 0);
  close(client);
  // A regular file at the path is never removed: the start fails instead.
  { std::ofstream(path) << "not a socket"; }
  GrpcListener::Options options;
  options.addresses = {"unix:" + path};
  options.hand_off = grpc.HandOff();
  absl::StatusOr<std::unique_ptr<GrpcListener>> refused = GrpcListener::Start(options);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(lstat(path.c_str(), &st), 0);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(GrpcListenerTest, AddressErrorsNameTheAddress) {
  FakeGrpc grpc;
  for (const char* address : {"127.0.0.1", "127.0.0.1:99999", "unix:", "192.0.2.1:0"}) {
    SCOPED_TRACE(address);
    GrpcListener::Options options;
    options.addresses = {address};
    options.hand_off = grpc.HandOff();
    absl::StatusOr<std::unique_ptr<GrpcListener>> l = GrpcListener::Start(options);
    ASSERT_FALSE(l.ok());
    EXPECT_THAT(l.status().message(), HasSubstr(std::string("cannot listen on ") + address));
  }
}

// The wildcard takes IPv4 (dual-stack where there is IPv6); IPv6 literals
// with and without brackets (--host=::1 makes "::1:PORT").
TEST(GrpcListenerTest, WildcardAndIpv6Literals) {
  FakeGrpc grpc;
  auto wildcard = StartOn("0.0.0.0:0", 10, &grpc);
  ASSERT_NE(wildcard, nullptr);
  const int client = ConnectTcp(wildcard->port(0));
  EXPECT_GE(client, 0);
  EXPECT_TRUE(grpc.WaitFor(1));
  close(client);
  const int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 loopback6{};
  loopback6.sin6_family = AF_INET6;
  loopback6.sin6_addr = in6addr_loopback;
  const bool have_ipv6 =
      probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&loopback6), sizeof(loopback6)) == 0;
  if (probe >= 0) close(probe);
  if (!have_ipv6) GTEST_SKIP() << "no IPv6 loopback";
  for (const char* address : {"[::1]:0", "::1:0"}) {
    SCOPED_TRACE(address);
    auto l = StartOn(address, 10, &grpc);
    ASSERT_NE(l, nullptr);
    const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 to = loopback6;
    to.sin6_port = htons(static_cast<uint16_t>(l->port(0)));
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    close(fd);
  }
}

TEST(GrpcListenerTest, PortInUseIsAnError) {
  FakeGrpc grpc;
  auto first = StartOn("127.0.0.1:0", 10, &grpc);
  ASSERT_NE(first, nullptr);
  GrpcListener::Options options;
  options.addresses = {"127.0.0.1:" + std::to_string(first->port(0))};
  options.hand_off = grpc.HandOff();
  absl::StatusOr<std::unique_ptr<GrpcListener>> second = GrpcListener::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("Address already in use"));
}

}  // namespace
}  // namespace tensorops
