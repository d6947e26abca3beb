// The HTTP transport's address and limits (server/http/http_transport.h),
// apart so that its connections (connection.h) read them too. HttpServer's
// Options (http_server.h) documents each for the door.
#ifndef TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_
#define TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/http/tls_context.h"

namespace tensorops {

struct HttpTransportOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                              // 0 picks a free port
  int64_t max_body_bytes = int64_t{272} << 20;  // 413 beyond it
  TlsContext tls;                               // set: HTTPS only
  int loops = 0;                // event-loop threads (0: one per core, at most kMaxDefaultLoops)
  int64_t max_connections = 0;  // open at once (0: no cap)
  // A request's header complete within this from its first byte (or the
  // connection's accept); a keep-alive connection idle this long closes.
  absl::Duration header_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(60);
  // A body keeps min_body_rate bytes/s over every body_rate_window (0: no
  // rate check, a body then has 120 s).
  int64_t min_body_rate = 1024;
  absl::Duration body_rate_window = absl::Seconds(10);

  static constexpr int kMaxDefaultLoops = 4;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_TRANSPORT_OPTIONS_H_
