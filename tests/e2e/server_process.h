// Starts tensorops-server as a child process on 127.0.0.1 with --port=0,
// learns the port from its first stdout line, and stops it by PID.
//
// Not thread-safe; one object per server.
#ifndef TENSOROPS_TESTS_E2E_SERVER_PROCESS_H_
#define TENSOROPS_TESTS_E2E_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tensorops::testing {

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { Stop(); }

  // Runs `binary --host=127.0.0.1 --port=0 extra_args...` and waits (up to
  // 20 s) for "listening on 127.0.0.1:PORT".
  absl::Status Start(const std::string& binary, const std::vector<std::string>& extra_args = {});

  // SIGTERM, then waits up to 10 s (SIGKILL after that). Returns the exit
  // status as from waitpid, or -1 if not running.
  int Stop();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_fd_ = -1;
};

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_E2E_SERVER_PROCESS_H_
