#include "server/http/connection_metrics.h"

namespace tensorops {

const ConnectionMetrics* RegisterHttpConnections(Metrics* metrics) {
  ConnectionMetricsSpec spec;
  spec.open_name = "tensorops_http_connections";
  spec.open_help =
      "Connections open on the HTTP/REST port (capped by "
      "--http_max_connections).";
  spec.closed_name = "tensorops_http_connections_closed_total";
  spec.closed_help =
      "HTTP/REST connections the server closed itself, by reason: "
      "cap_idle (idle, to make room at --http_max_connections), "
      "cap_refused (new, at the cap with none idle), header_timeout "
      "(--http_header_timeout), idle_timeout (--http_idle_timeout), "
      "body_rate (--http_min_body_rate), no_descriptors (accepted and "
      "closed while the process was out of file descriptors).";
  // Indexed by HttpClose.
  spec.reasons = {"cap_idle",     "cap_refused", "header_timeout",
                  "idle_timeout", "body_rate",   "no_descriptors"};
  static_assert(static_cast<int>(HttpClose::kCapIdle) == 0);
  static_assert(static_cast<int>(HttpClose::kCapRefused) == 1);
  static_assert(static_cast<int>(HttpClose::kHeaderTimeout) == 2);
  static_assert(static_cast<int>(HttpClose::kIdleTimeout) == 3);
  static_assert(static_cast<int>(HttpClose::kBodyRate) == 4);
  static_assert(static_cast<int>(HttpClose::kNoDescriptors) == 5);
  return metrics->AddConnections(spec);
}

}  // namespace tensorops
