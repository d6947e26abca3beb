// The Open Inference Protocol over HTTP/REST (KServe v2 / Triton's HTTP
// endpoints, ../shared/api-rest.md): a thin front door on libevent's evhttp.
//
// One event loop thread accepts, reads requests (keep-alive, chunked
// bodies, 100-continue and the body limit are evhttp's) and answers. An
// infer is translated by server/http/json_binding.h into an InferRequest and
// runs on the Call lifecycle every front door shares (server/core/call.h:
// bearer token, drain gate, admission, the kernel on the pool, metrics under
// method="REST", access log); the pool thread encodes the answer and hands it
// back to the loop, which sends it.
//
// Also statistics (the gRPC ModelStatistics' totals), the repository index
// and system shared memory status/register/unregister (501 unless
// --shared_memory=system; status then lists nothing).
//
// Health live/ready are open (no token) and ready answers 503 while the
// server drains; everything else needs the token when one is configured and
// gets 503 while draining.
//
// With Options::tls the port speaks HTTPS only: every connection starts with
// a TLS handshake (the gRPC door's certificate, and with a client CA mutual
// TLS); a failed handshake closes that connection and nothing is answered in
// the clear.
//
// Thread-safety: Start and Stop from one thread; the loop runs on its own.
#ifndef TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
#define TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/core/call.h"
#include "server/http/tls_context.h"
#include "server/oip/shm_registry.h"

struct bufferevent;
struct event_base;
struct evhttp;
struct evhttp_request;

namespace tensorops {

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;  // 0 picks a free port
    // Whole request body (413 beyond it, as gRPC's --max_message_bytes).
    int64_t max_body_bytes = int64_t{272} << 20;
    // --auth_token_file: a shared-memory region belongs to the Authorization
    // value that registered it (as on gRPC).
    bool tokens_required = false;
    // Set: HTTPS only, with this context (MakeTlsContext); null: plaintext.
    TlsContext tls;
  };

  // Binds and starts the loop. Neither pointer is owned; both must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(CallPipeline* pipeline, ShmRegistry* shm,
                                                           const Options& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // Stops the loop (connections close) and joins it. Calls still in flight
  // must have finished (the drain waits for them). Idempotent.
  void Stop();

 private:
  class InferCall;
  HttpServer(CallPipeline* pipeline, ShmRegistry* shm);

  static bufferevent* NewTlsConnection(event_base* base, void* self);
  static void OnRequest(evhttp_request* req, void* self);
  void Handle(evhttp_request* req);
  void Infer(evhttp_request* req, const std::string& model, const std::string& version);

  CallPipeline* const pipeline_;
  ShmRegistry* const shm_;
  bool tokens_required_ = false;
  TlsContext tls_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  int port_ = 0;
  std::thread loop_;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
