// The Open Inference Protocol over HTTP/REST (KServe v2 / Triton's HTTP
// endpoints, ../shared/api-rest.md): a thin front door on Boost.Beast
// (HTTP/1.1 messages) and Boost.Asio (sockets, TLS).
//
// Event-loop threads (Options::loops, one per core by default: a single loop
// parsing JSON bodies and running small kernels inline held REST at 0.3x of
// gRPC at 64 KiB and 8 callers), each an io_context with one thread; one
// acceptor hands connections to the loops in turn and a connection stays on
// its loop. Beast parses each request's header (keep-alive, pipelining,
// chunked bodies and the body limit are its; 100-continue is answered here);
// a body of known length is then read straight into one buffer that big
// calls reuse (BufferCache), in reads as large as the socket has, so a
// 16 MiB body is a few dozen reads and no copy (libevent 2.1's evhttp, the
// first transport, read 4 KiB per loop turn: REST was 0.3-0.7x of gRPC from
// 64 KiB up). A body counts against the in-flight byte budget
// (--max_inflight_bytes) before it is read, as a gRPC message does: a
// declared length is reserved whole once the header is in (over the budget:
// 503 at once, the body unread), a chunked body grows in place a step at a
// time, each step reserved first; the reservation becomes the call's
// admission ticket (Call::HoldReservation). An infer is translated by
// server/http/json_binding.h into an InferRequest and runs on the Call
// lifecycle every front door shares (server/core/call.h: bearer token, drain
// gate, admission, the kernel inline or on the pool, metrics under
// method="REST", access log); the thread that finishes it encodes the answer
// and posts it to the connection's loop, which writes the JSON and the
// binary outputs in one gather write without copying them, holding the
// call's ticket (shrunk to the answer's bytes) until they are written.
//
// Also statistics (the gRPC ModelStatistics' totals), the repository index
// and system shared memory status/register/unregister (501 unless
// --shared_memory=system; status then lists nothing).
//
// Health live/ready are open (no token) and ready answers 503 while the
// server drains; everything else needs the token when one is configured and
// gets 503 while draining. Every error, the transport's too (400 malformed,
// 413 body over the limit, 431 header over 64 KiB, 503 body over the
// in-flight budget), is a JSON {"error": "..."} body; after refusing a
// request it has not read, a connection reads on (dropping the bytes) for
// up to 5 s before it closes, so the client gets the answer, not a reset.
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

#include "absl/status/statusor.h"
#include "server/core/call.h"
#include "server/http/tls_context.h"
#include "server/oip/shm_registry.h"

namespace tensorops {

class HttpServerImpl;  // http_server.cc: Boost stays out of this header

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
  explicit HttpServer(std::unique_ptr<HttpServerImpl> impl);

  std::unique_ptr<HttpServerImpl> impl_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
