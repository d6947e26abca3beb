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
// 408 header or body too slow, 413 body over the limit, 431 header over 64 KiB, 503 body over the
// in-flight budget), is a JSON {"error": "..."} body; after refusing a
// request it has not read, a connection reads on (dropping the bytes) for
// up to 5 s before it closes, so the client gets the answer, not a reset.
//
// Floods (Options::max_connections, header_timeout, idle_timeout,
// min_body_rate): at most max_connections open at once; at the cap a new
// connection closes the one idle longest (waiting for a request with no byte
// of it read), or, when none is idle, gets 503 and is closed. A header must
// be whole within header_timeout and a body keep min_body_rate (else 408); a
// keep-alive connection with no request for idle_timeout is closed. Out of
// descriptors (EMFILE), the acceptor closes the connections waiting in the
// backlog with a spare descriptor and tries again: it never stops accepting.
//
// With Options::tls the port speaks HTTPS only: every connection starts with
// a TLS handshake (the gRPC door's certificate, and with a client CA mutual
// TLS); a failed handshake closes that connection and nothing is answered in
// the clear.
//
// Built of two halves that meet at one seam, Route(request, executor,
// reply) (server/http/http_message.h): the transport
// (server/http/http_transport.h: loops, accept, connections, deadlines, the
// cap, body budgets, TLS; it knows no protocol) and the Open Inference
// Protocol's routes (server/http/oip_routes.h, with infer_call.h and
// oip_json.h; they know no sockets).
//
// Thread-safety: Start and Stop from one thread; the loops run on their own
// and share only thread-safe state (the pipeline, the shm registry).
#ifndef TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
#define TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/core/call.h"
#include "server/http/tls_context.h"
#include "server/http/transport_options.h"
#include "server/oip/oip_service.h"

namespace tensorops {

class HttpServerImpl;  // http_server.cc: Boost stays out of this header

class HttpServer {
 public:
  // The door's address and limits (transport_options.h documents each).
  using Options = HttpTransportOptions;
  static constexpr int kMaxDefaultLoops = HttpTransportOptions::kMaxDefaultLoops;

  // Binds and starts the loops. Neither pointer is owned; both must outlive
  // the server. The control endpoints are renderings of `oip`'s values.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(CallPipeline* pipeline, OipService* oip,
                                                           const Options& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Options::max_connections (0: no cap).
  int64_t max_connections() const { return max_connections_; }

  // Stops the loops (connections close) and joins them. Calls still in
  // flight must have finished (the drain waits for them). Idempotent.
  void Stop();

 private:
  explicit HttpServer(std::unique_ptr<HttpServerImpl> impl);

  std::unique_ptr<HttpServerImpl> impl_;
  int port_ = 0;
  int64_t max_connections_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_SERVER_H_
