#include "tests/harness/server_process.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tensorops::testing {

std::shared_ptr<grpc::Channel> NewTestChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}
namespace {

// The number after `key` on a complete line of `seen`: >0 found, 0 when the
// line is absent or not complete yet.
int PortAfter(const std::string& seen, const std::string& key, char end) {
  const size_t at = seen.find(key);
  if (at == std::string::npos) return 0;
  const size_t eol = seen.find('\n', at);
  if (eol == std::string::npos) return 0;
  const std::string rest = seen.substr(at + key.size(), eol - at - key.size());
  const size_t stop = rest.find(end);
  return std::atoi(rest.substr(0, stop).c_str());
}

// "metrics on http://HOST:PORT/metrics": the port after the last ':' before "/metrics".
int MetricsPort(const std::string& seen) {
  const std::string key = "metrics on http://";
  const size_t at = seen.find(key);
  if (at == std::string::npos) return 0;
  const size_t eol = seen.find('\n', at);
  if (eol == std::string::npos) return 0;
  const std::string url = seen.substr(at + key.size(), eol - at - key.size());
  const size_t slash = url.find('/');
  const std::string hostport = url.substr(0, slash);
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(hostport.substr(colon + 1).c_str());
}

}  // namespace

absl::Status ServerProcess::Start(const std::string& binary,
                                  const std::vector<std::string>& extra_args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  // --http_port=-1 and --metrics_port=0 first (a later one in extra_args
  // wins): never the defaults 8000 and 9464, which parallel tests would
  // share (a test that passed no --metrics_port failed under ctest -j2 when
  // another server held 9464).
  std::vector<std::string> args = {binary, "--host=127.0.0.1", "--port=0", "--http_port=-1",
                                   "--metrics_port=0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  bool metrics_disabled = false;
  bool want_http = false;
  for (const std::string& a : extra_args) {
    if (a == "--metrics_port=-1") metrics_disabled = true;
    if (a == "--http_port=0") want_http = true;
  }
  port_ = 0;
  metrics_port_ = -1;
  http_port_ = -1;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    // If the test dies (a crash, a sanitizer halting it), the server goes
    // with it instead of holding ctest's output pipe open forever. (The
    // signal follows the forking thread: tests start servers from their main
    // thread.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  stdout_fd_ = pipe_fds[0];
  // Read until the "listening on" line (and the metrics line), bounded in time.
  std::string seen;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool metrics_wait_started = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (port_ <= 0) port_ = PortAfter(seen, "listening on 127.0.0.1:", '\n');
    if (want_http && http_port_ <= 0) {
      // Printed after the other lines: wait for it like the port's.
      const int h = PortAfter(seen, "http on http://127.0.0.1:", '\n');
      http_port_ = h > 0 ? h : -1;
    }
    if (port_ > 0 && (!want_http || http_port_ > 0)) {
      const int mport = MetricsPort(seen);
      if (mport > 0) {
        metrics_port_ = mport;
        return absl::OkStatus();
      }
      if (metrics_disabled) return absl::OkStatus();
      if (!metrics_wait_started) {
        // The server prints both lines together; give the second one a moment.
        metrics_wait_started = true;
        deadline = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(2));
      }
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) break;  // child exited (or closed stdout)
    seen.append(buf, n);
  }
  if (port_ > 0) return absl::OkStatus();  // listening, but no metrics line
  Stop();
  return absl::InternalError(absl::StrCat("server did not start; it printed: ", seen));
}

bool ServerProcess::Signal(int sig) {
  if (pid_ <= 0) return false;
  return kill(pid_, sig) == 0;
}

int ServerProcess::WaitForExit(int timeout_ms) {
  if (pid_ <= 0) return -1;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  CloseStdout();
  return status;
}

int ServerProcess::OpenFds() const {
  if (pid_ <= 0) return -1;
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid_, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int64_t ServerProcess::StatusKiB(const std::string& field) const {
  if (pid_ <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
  }
  return -1;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "ServerProcess: pid %d still running 30 s after SIGTERM; SIGKILL\n",
                   static_cast<int>(pid_));
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  CloseStdout();
  return status;
}

void ServerProcess::CloseStdout() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
}

std::unique_ptr<ServerProcess> StartTestServer(const std::string& binary,
                                               std::vector<std::string> args) {
  args.push_back("--metrics_port=0");
  auto server = std::make_unique<ServerProcess>();
  const absl::Status st = server->Start(binary, args);
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return nullptr;
  return server;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tensorops::testing
