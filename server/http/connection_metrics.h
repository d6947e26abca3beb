// The HTTP transport's connection metrics, which the door registers with
// the server's metrics (server/core/metrics.h) at start: core/ names no
// door. tensorops_http_connections (open now) and
// tensorops_http_connections_closed_total{reason} (HttpClose).
//
// Thread-safety: the handle is immutable; registering is Metrics's (safe
// from any thread).
#ifndef TENSOROPS_SERVER_HTTP_CONNECTION_METRICS_H_
#define TENSOROPS_SERVER_HTTP_CONNECTION_METRICS_H_

#include "server/core/metrics.h"

namespace tensorops {

// Why the transport closed a connection itself: the `reason` of
// tensorops_http_connections_closed_total.
enum class HttpClose {
  kCapIdle,        // idle, closed to make room for a new one at --http_max_connections
  kCapRefused,     // new, refused (503 or closed at once): at the cap, none idle
  kHeaderTimeout,  // no whole request header within --http_header_timeout
  kIdleTimeout,    // keep-alive, no next request within --http_idle_timeout
  kBodyRate,       // body slower than --http_min_body_rate
  kNoDescriptors,  // accepted and closed at once while the process was out of fds
};

// The two families, registered (the same handle however often).
const ConnectionMetrics* RegisterHttpConnections(Metrics* metrics);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_CONNECTION_METRICS_H_
