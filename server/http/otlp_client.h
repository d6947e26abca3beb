// The span exporter's HTTP client (server/core/span_export.h): one POST of
// an OTLP/HTTP JSON body to a collector, on Boost.Beast, with the whole
// exchange (resolve, connect, send, answer) bounded by a timeout.
//
// --otlp_endpoint takes what OpenTelemetry's OTEL_EXPORTER_OTLP_ENDPOINT
// takes: "http://HOST:PORT" (the collector's OTLP/HTTP port, 4318 by
// convention), the signal's path /v1/traces then appended; a URL with a
// path is used as it is. Plaintext only (no https): point it at a
// collector or agent beside the server.
//
// Thread-safety: the returned function may be called from any thread; each
// call makes its own connection (one per batch: a second's spans).
#ifndef TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_
#define TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/span_export.h"

namespace tensorops {

// Where --otlp_endpoint points: host, port, path.
struct OtlpTarget {
  std::string host;
  std::string port;
  std::string path;
};
// INVALID_ARGUMENT naming the flag for anything but http://HOST[:PORT][/PATH].
absl::StatusOr<OtlpTarget> ParseOtlpEndpoint(absl::string_view endpoint);

// A PostFn for SpanExporter that POSTs to `target`: OK for a 2xx answer,
// UNAVAILABLE for a failed exchange or another status, DEADLINE_EXCEEDED
// past the timeout.
SpanExporter::PostFn OtlpHttpPost(OtlpTarget target);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_
