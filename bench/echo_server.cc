// echo_server: the baseline of the service benchmark. A bare gRPC server
// (callback API, the same max message sizes as tensorops-server) whose one
// method copies the request's bytes into the response. Nothing else: no
// health, no reflection, no metrics, no thread hand-off.
//
// Usage: echo_server [--host=127.0.0.1] [--port=0] [--max_message_bytes=285212672]
// Prints `echo-server listening on HOST:PORT` on stdout; stops on SIGTERM/SIGINT.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "bench/echo.grpc.pb.h"

namespace {

class EchoService final : public tensorops::bench::Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx,
                                 const tensorops::bench::EchoRequest* request,
                                 tensorops::bench::EchoResponse* response) override {
    // One copy of the payload, as a kernel writing its output would make.
    response->set_payload(request->payload());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  int64_t max_message_bytes = int64_t{272} << 20;  // tensorops-server's default
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (Flag(argv[i], "--host", &v)) {
      host = v;
    } else if (Flag(argv[i], "--port", &v)) {
      port = std::atoi(v.c_str());
    } else if (Flag(argv[i], "--max_message_bytes", &v)) {
      max_message_bytes = std::strtoll(v.c_str(), nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: echo_server [--host=127.0.0.1] [--port=0] "
                   "[--max_message_bytes=285212672]\nunknown argument: %s\n",
                   argv[i]);
      return 2;
    }
  }

  // Block SIGINT/SIGTERM before gRPC starts threads so only the waiter sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  EchoService service;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address = host + ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  const int max_message =
      static_cast<int>(std::min<int64_t>(max_message_bytes, std::numeric_limits<int>::max()));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr, "echo_server: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("echo-server listening on %s:%d\n", host.c_str(), bound_port);
  std::fflush(stdout);

  std::thread waiter([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  });
  server->Wait();
  waiter.join();
  return 0;
}
