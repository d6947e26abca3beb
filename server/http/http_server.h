// The Open Inference Protocol over HTTP/REST (KServe v2 / Triton's HTTP
// endpoints, ../shared/api-rest.md): a thin front door on libevent's evhttp.
//
// Event-loop threads (Options::loops, one per core by default: a single loop
// parsing JSON bodies and running small kernels inline held REST at 0.3x of
// gRPC at 64 KiB and 8 callers) each accept on the one listening socket and
// read requests (keep-alive, chunked bodies, 100-continue and the body limit
// are evhttp's) and answer them; a connection stays on its loop. An infer is
// translated by server/http/json_binding.h into an InferRequest and runs on
// the Call lifecycle every front door shares (server/core/call.h: bearer
// token, drain gate, admission, the kernel inline or on the pool, metrics
// under method="REST", access log); a pool thread encodes the answer and
// hands it back to the connection's loop, which sends it.
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
// Thread-safety: Start and Stop from one thread; the loops run on their own
// and share only thread-safe state (the pipeline, the shm registry).
#ifndef TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
#define TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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
    // Event-loop threads, each accepting on the one listening socket and
    // serving its connections (0: one per core, at most kMaxDefaultLoops).
    int loops = 0;
  };
  static constexpr int kMaxDefaultLoops = 4;

  // Binds and starts the loops. Neither pointer is owned; both must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(CallPipeline* pipeline, ShmRegistry* shm,
                                                           const Options& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // Stops the loops (connections close) and joins them. Calls still in
  // flight must have finished (the drain waits for them). Idempotent.
  void Stop();

 private:
  class InferCall;
  HttpServer(CallPipeline* pipeline, ShmRegistry* shm);

  // evhttp's bufferevent for each accepted connection (evhttp_set_bevcb).
  static bufferevent* NewConnection(event_base* base, void* self);
  static bufferevent* NewTlsConnection(event_base* base, void* self);
  static void OnRequest(evhttp_request* req, void* self);
  void Handle(evhttp_request* req);
  void Infer(evhttp_request* req, const std::string& model, const std::string& version);

  CallPipeline* const pipeline_;
  ShmRegistry* const shm_;
  bool tokens_required_ = false;
  TlsContext tls_;
  // One event base and evhttp per thread; a connection stays on the loop
  // that accepted it.
  struct Loop {
    event_base* base = nullptr;
    evhttp* http = nullptr;
    std::thread thread;
  };
  std::vector<Loop> loops_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
