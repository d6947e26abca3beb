// echo_server: the baseline of the service benchmark. A bare gRPC server
// (callback API, the same max message sizes as tensorops-server) whose
// unary method copies the request's bytes into the response, and whose bidi
// stream (EchoStream, the baseline of ExecuteStream) copies each received
// chunk into a reply chunk. Nothing else: no health, no reflection, no
// metrics, no thread hand-off.
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
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
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

  grpc::ServerBidiReactor<tensorops::bench::EchoChunk, tensorops::bench::EchoChunk>* EchoStream(
      grpc::CallbackServerContext*) override;
};

// One EchoStream call. Reads and writes overlap: each chunk read is copied
// into a reply queued for writing, and the next read starts at once unless
// kMaxQueued replies already wait (then when a write completes), so a slow
// reader on the client side holds back the uploads instead of growing the
// queue. Deletes itself in OnDone.
//
// Thread-safety: gRPC may run OnReadDone and OnWriteDone concurrently; mu_
// guards the queue and the flags.
class EchoStreamReactor final
    : public grpc::ServerBidiReactor<tensorops::bench::EchoChunk, tensorops::bench::EchoChunk> {
 public:
  EchoStreamReactor() { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {  // half-close (or the call broke): finish after the queued writes
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    if (failed_) {  // the reply side broke: read no more, finish
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    out_.emplace_back();
    out_.back().set_data(in_.data());  // the one copy, as in the unary Echo
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
    if (out_.size() < kMaxQueued) {
      StartRead(&in_);
    } else {
      read_paused_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    writing_ = false;
    if (!ok) {
      failed_ = true;
      out_.clear();
    }
    if (!out_.empty()) {
      writing_ = true;
      StartWrite(&out_.front());
    }
    if (read_paused_ && !failed_) {
      read_paused_ = false;
      StartRead(&in_);
    }
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  static constexpr size_t kMaxQueued = 4;

  void MaybeFinishLocked() {
    if (finished_ || writing_ || !(reads_done_ || failed_)) return;
    finished_ = true;
    Finish(failed_ ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed")
                   : grpc::Status::OK);
  }

  std::mutex mu_;
  tensorops::bench::EchoChunk in_;
  std::deque<tensorops::bench::EchoChunk> out_;  // front() is being written when writing_
  bool writing_ = false, reads_done_ = false, read_paused_ = false, failed_ = false,
       finished_ = false;
};

grpc::ServerBidiReactor<tensorops::bench::EchoChunk, tensorops::bench::EchoChunk>*
EchoService::EchoStream(grpc::CallbackServerContext*) {
  return new EchoStreamReactor();
}

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
