// Starts tensorops-server as a child process on 127.0.0.1 with --port=0,
// learns the gRPC port (and the metrics port, when it prints one) from its
// stdout, and stops it by PID.
//
// Not thread-safe; one object per server. pid(), port(), metrics_port() and
// address() may be read from any thread while no other method runs.
#ifndef TENSOROPS_TESTS_HARNESS_SERVER_PROCESS_H_
#define TENSOROPS_TESTS_HARNESS_SERVER_PROCESS_H_

#include <grpcpp/channel.h>
#include <sys/types.h>

#include <memory>
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

  // Runs `binary --host=127.0.0.1 --port=0 --http_port=-1 extra_args...` and waits (up to
  // 20 s) for "listening on 127.0.0.1:PORT". Then, unless extra_args contain
  // --metrics_port=-1, waits (up to 2 s more) for "metrics on
  // http://HOST:MPORT/metrics"; metrics_port() stays -1 without that line.
  absl::Status Start(const std::string& binary, const std::vector<std::string>& extra_args = {});

  // SIGTERM, then waits up to 30 s (SIGKILL after that: the exit status
  // then shows the kill). Generous because a sanitizer build on a loaded
  // 2-core machine has been seen to take 10 s for a clean stop (drain quiet
  // period, gRPC shutdown, metrics endpoint); a hung stop still fails.
  // Returns the exit status as from waitpid, or -1 if not running.
  int Stop();

  // Sends `sig` to the running server. False if it is not running.
  bool Signal(int sig);
  // Waits up to `timeout_ms` for the server to exit by itself and reaps it.
  // Returns the exit status as from waitpid, or -1 if it is not running or
  // is still running at the timeout (then it keeps running; Stop() ends it).
  int WaitForExit(int timeout_ms);

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The HTTP/REST port when extra_args held --http_port=0 (Start then also
  // waits for "http on http://127.0.0.1:PORT"); -1 otherwise.
  int http_port() const { return http_port_; }
  // A size field of /proc/PID/status in KiB ("VmRSS:", "VmHWM:"), or -1 when
  // the server is not running or has no such field.
  int64_t StatusKiB(const std::string& field) const;  // -1 if the server printed none
  // Descriptors the server holds now (/proc/PID/fd); -1 when it is not running.
  int OpenFds() const;
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void CloseStdout();

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = -1;
  int http_port_ = -1;
  int stdout_fd_ = -1;
};

// Starts `binary` with `args` and --metrics_port=0 (never the default 9464).
// On failure records a GoogleTest failure with the reason and returns nullptr.
std::unique_ptr<ServerProcess> StartTestServer(const std::string& binary,
                                               std::vector<std::string> args);

// The whole file, as bytes; empty when it cannot be read.
std::string ReadFile(const std::string& path);

// A plaintext channel to a test server with its own TCP connection (local
// subchannel pool) and no client-side message size limits.
std::shared_ptr<grpc::Channel> NewTestChannel(const std::string& address);

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_SERVER_PROCESS_H_
