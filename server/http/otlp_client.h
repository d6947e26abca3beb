// The span exporter's HTTP client (server/core/span_export.h): one POST of
// an OTLP/HTTP JSON body to a collector, on Boost.Beast, with the whole
// exchange (resolve, connect, send, answer) bounded by a timeout.
//
// --otlp_endpoint takes "http://HOST:PORT" (the collector's OTLP/HTTP port,
// 4318 by convention), the signal's path /v1/traces then appended; a URL
// with a path is used as it is. Without it, OpenTelemetry's own variables
// (OtlpSettingsFrom). Plaintext only (no https): point it at a collector or
// agent beside the server.
//
// Thread-safety: the returned function may be called from any thread; each
// call makes its own connection (one per batch: a second's spans).
#ifndef TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_
#define TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/span_export.h"

namespace tensorops {

// Where spans go: host, port, path, and the body's media type.
struct OtlpTarget {
  std::string host;
  std::string port;
  std::string path;
  std::string content_type = "application/json";
};

// How an endpoint URL's path is read.
enum class OtlpEndpointKind {
  // --otlp_endpoint: a URL without a path gets /v1/traces, one with a path
  // is used as it is.
  kFlag,
  // OTEL_EXPORTER_OTLP_ENDPOINT, every signal's base: /v1/traces is
  // appended to its path (OpenTelemetry's rule).
  kBase,
  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is.
  kTraces,
};

// INVALID_ARGUMENT naming `name` (the flag or variable) for anything but
// http://HOST[:PORT][/PATH].
absl::StatusOr<OtlpTarget> ParseOtlpEndpoint(absl::string_view endpoint,
                                             OtlpEndpointKind kind = OtlpEndpointKind::kFlag,
                                             absl::string_view name = "--otlp_endpoint");

// The span exporter's settings from --otlp_endpoint (`flag_endpoint`, which
// wins) and OpenTelemetry's environment variables, read through `env`
// (nullopt: unset): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
// OTEL_EXPORTER_OTLP_ENDPOINT (the path rule above); OTEL_SERVICE_NAME
// (default tensorops-server); OTEL_TRACES_SAMPLER and _ARG (ParseSampler);
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
// http/protobuf (the default, as OpenTelemetry's) or http/json;
// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true: no export.
// INVALID_ARGUMENT naming the variable for a bad value.
struct OtlpSettings {
  std::optional<OtlpTarget> target;  // nullopt: spans are not exported
  SpanExporter::Encoding encoding = SpanExporter::Encoding::kProtobuf;
  std::string service_name = "tensorops-server";
  Sampler sampler;
};
using EnvFn = std::function<std::optional<std::string>(const char* name)>;
absl::StatusOr<OtlpSettings> OtlpSettingsFrom(absl::string_view flag_endpoint, const EnvFn& env);
// The process's environment, as OtlpSettingsFrom reads it.
std::optional<std::string> ProcessEnv(const char* name);

// A PostFn for SpanExporter that POSTs to `target`: OK for a 2xx answer,
// UNAVAILABLE for a failed exchange or another status, DEADLINE_EXCEEDED
// past the timeout.
SpanExporter::PostFn OtlpHttpPost(OtlpTarget target);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_OTLP_CLIENT_H_
