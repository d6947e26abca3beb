// The HTTP/1.1 transport under the REST door, knowing no protocol above it
// (no OIP, no JSON: its own library, tensorops_http_transport, checked by
// the tests http_transport_links_no_oip and http_transport_includes_no_oip).
// Each request read whole goes to the protocol's handler
// (HttpProtocol::route, http_message.h); the server
// (server/http/http_server.h) gives it the Open Inference Protocol's routes.
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
// time, each step reserved first (request_body.h); the reservation becomes
// the call's admission ticket (Call::HoldReservation). An answer is written
// in one gather write without copying its parts, holding the call's ticket
// until it is written.
//
// What it refuses itself (400 malformed, 408 header or body too slow, 413
// body over the limit, 431 header over 64 KiB, 503 body over the in-flight
// budget) the protocol words (HttpProtocol::error); after refusing a request
// it has not read, a connection reads on (dropping the bytes) for up to 5 s
// before it closes, so the client gets the answer, not a reset.
//
// Floods (Options::max_connections, header_timeout, idle_timeout,
// min_body_rate): at most max_connections open at once; at the cap a new
// connection closes the one idle longest (waiting for a request with no byte
// of it read), or, when none is idle, gets 503 and is closed. A header must
// be whole within header_timeout and a body keep min_body_rate (else 408); a
// keep-alive connection with no request for idle_timeout is closed. Out of
// descriptors (EMFILE), the acceptor closes the connections waiting in the
// backlog with a spare descriptor and tries again: it never stops accepting.
// Its connections on /metrics: connection_metrics.h.
//
// With Options::tls the port speaks HTTPS only: every connection starts with
// a TLS handshake (the gRPC door's certificate, and with a client CA mutual
// TLS); a failed handshake closes that connection and nothing is answered in
// the clear.
//
// Thread-safety: Start and Stop from one thread; the loops run on their own
// and share only thread-safe state (the pipeline, the connection table).
#ifndef TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_
#define TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/core/call.h"
#include "server/http/http_message.h"
#include "server/http/transport_options.h"

namespace tensorops {

class HttpTransport {
 public:
  using Options = HttpTransportOptions;

  // Binds and starts the loops. `pipeline` (the bodies' budget, the
  // connection metrics) is not owned and must outlive the transport; the
  // protocol's functions are called on the loops' threads.
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Start(CallPipeline* pipeline,
                                                              HttpProtocol protocol,
                                                              const Options& options);
  // Stop(), then the connections close.
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  int port() const { return port_; }

  // Stops the loops and joins them; connections close with the transport.
  // Idempotent.
  void Stop();

 private:
  class Impl;  // http_transport.cc: Boost stays out of this header
  explicit HttpTransport(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_TRANSPORT_H_
