#include "tests/e2e/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tensorops::testing {

absl::Status ServerProcess::Start(const std::string& binary,
                                  const std::vector<std::string>& extra_args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> args = {binary, "--host=127.0.0.1", "--port=0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
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
  // Read until the "listening on" line, bounded in time.
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) break;  // child exited
    seen.append(buf, n);
    const std::string key = "listening on 127.0.0.1:";
    const size_t at = seen.find(key);
    if (at != std::string::npos) {
      const size_t eol = seen.find('\n', at);
      if (eol == std::string::npos) continue;
      port_ = std::atoi(seen.substr(at + key.size(), eol - at - key.size()).c_str());
      if (port_ > 0) return absl::OkStatus();
    }
  }
  Stop();
  return absl::InternalError(absl::StrCat("server did not start; it printed: ", seen));
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
  return status;
}

}  // namespace tensorops::testing
