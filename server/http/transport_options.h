// The HTTP door's address and limits: the transport's
// (server/http/http_transport.h), apart so that its connections
// (connection.h) read them too, and HttpServer::Options (http_server.h), the
// same struct: one place for each default.
#ifndef TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_
#define TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/http/tls_context.h"

namespace tensorops {

struct HttpTransportOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 picks a free port
  // Whole request body (413 beyond it, as gRPC's --max_message_bytes).
  int64_t max_body_bytes = int64_t{272} << 20;
  // Set: HTTPS only, with this context (MakeTlsContext); null: plaintext.
  TlsContext tls;
  // Event-loop threads, each accepting on the one listening socket and
  // serving its connections (0: one per core, at most kMaxDefaultLoops).
  int loops = 0;
  // Connections open at once (--http_max_connections; 0: no cap). At the
  // cap a new connection makes room by closing the longest-idle one (a
  // connection waiting for a request with no byte of it read yet); when
  // none is idle it gets 503 and is closed.
  int64_t max_connections = 0;
  // From a connection's accept, or a keep-alive connection's next request's
  // first byte, until that request's header is complete; past it 408 and
  // close (a connection that sent nothing is closed without an answer).
  absl::Duration header_timeout = absl::Seconds(30);
  // A keep-alive connection with no request pending is closed after this.
  absl::Duration idle_timeout = absl::Seconds(60);
  // A body must arrive at min_body_rate bytes/s or more, over every
  // body_rate_window (and the server must not be the one behind: bytes
  // waiting unread excuse the client); slower: 408 and close. 0: no rate
  // check, a body then has 120 s.
  int64_t min_body_rate = 1024;
  absl::Duration body_rate_window = absl::Seconds(10);

  static constexpr int kMaxDefaultLoops = 4;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_
