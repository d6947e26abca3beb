#include "server/http/otlp_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kernels/status_macros.h"

namespace tensorops {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

absl::Status Post(const OtlpTarget& target, const std::string& body, absl::Duration timeout) {
  const auto limit = std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
  net::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  http::request<http::string_body> request{http::verb::post, target.path, 11};
  request.set(http::field::host, absl::StrCat(target.host, ":", target.port));
  request.set(http::field::content_type, target.content_type);
  request.body() = body;
  request.prepare_payload();
  http::response<http::string_body> response;
  beast::flat_buffer buffer;
  bool done = false;
  beast::error_code failure;
  // One chain of asynchronous steps, so that one timer (the stream's, and
  // run_for's for the resolve) bounds the whole exchange.
  stream.expires_after(limit);
  resolver.async_resolve(
      target.host, target.port, [&](beast::error_code ec, tcp::resolver::results_type results) {
        if (ec) {
          failure = ec;
          done = true;
          return;
        }
        stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) {
            failure = ec;
            done = true;
            return;
          }
          http::async_write(stream, request, [&](beast::error_code ec, size_t) {
            if (ec) {
              failure = ec;
              done = true;
              return;
            }
            http::async_read(stream, buffer, response, [&](beast::error_code ec, size_t) {
              failure = ec;
              done = true;
            });
          });
        });
      });
  io.run_for(limit);
  if (!done) {
    return absl::DeadlineExceededError(
        absl::StrCat("no answer from the collector within ", absl::FormatDuration(timeout)));
  }
  if (failure) {
    if (failure == beast::error::timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("no answer from the collector within ", absl::FormatDuration(timeout)));
    }
    return absl::UnavailableError(absl::StrCat("collector at ", target.host, ":", target.port,
                                               target.path, ": ", failure.message()));
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  const unsigned status = response.result_int();
  if (status < 200 || status >= 300) {
    return absl::UnavailableError(absl::StrCat("collector at ", target.host, ":", target.port,
                                               target.path, " answered ", status));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OtlpTarget> ParseOtlpEndpoint(absl::string_view endpoint, OtlpEndpointKind kind,
                                             absl::string_view name) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", endpoint.substr(0, 200), ": ", why,
                     " (want http://HOST:PORT, e.g. http://otel-collector:4318)"));
  };
  absl::string_view rest = endpoint;
  if (!absl::ConsumePrefix(&rest, "http://")) return invalid("not an http:// URL");
  OtlpTarget target;
  const size_t slash = rest.find('/');
  const absl::string_view authority = rest.substr(0, slash);
  const absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  switch (kind) {
    case OtlpEndpointKind::kFlag:
      target.path = path.empty() || path == "/" ? "/v1/traces" : std::string(path);
      break;
    case OtlpEndpointKind::kBase:
      target.path = absl::StrCat(absl::StripSuffix(path, "/"), "/v1/traces");
      break;
    case OtlpEndpointKind::kTraces:
      target.path = path.empty() ? "/" : std::string(path);
      break;
  }
  const size_t colon = authority.rfind(':');
  if (colon == absl::string_view::npos || authority.back() == ']') {
    target.host = std::string(authority);
    target.port = "80";
  } else {
    target.host = std::string(authority.substr(0, colon));
    target.port = std::string(authority.substr(colon + 1));
    int port = 0;
    if (!absl::SimpleAtoi(target.port, &port) || port < 1 || port > 65535) {
      return invalid("the port must be 1..65535");
    }
  }
  // [::1] -> ::1 for the resolver.
  if (absl::StartsWith(target.host, "[") && absl::EndsWith(target.host, "]")) {
    target.host = target.host.substr(1, target.host.size() - 2);
  }
  if (target.host.empty()) return invalid("no host");
  return target;
}

std::optional<std::string> ProcessEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<OtlpSettings> OtlpSettingsFrom(absl::string_view flag_endpoint, const EnvFn& env) {
  OtlpSettings settings;
  auto get = [&env](const char* name) { return env(name).value_or(""); };
  if (const std::string name = get("OTEL_SERVICE_NAME"); !name.empty()) {
    settings.service_name = name;
  }
  ASSIGN_OR_RETURN(settings.sampler,
                   ParseSampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG")));
  if (get("OTEL_TRACES_EXPORTER") == "none" ||
      absl::EqualsIgnoreCase(get("OTEL_SDK_DISABLED"), "true")) {
    return settings;
  }
  const char* protocol_variable = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
  std::string protocol = get(protocol_variable);
  if (protocol.empty()) {
    protocol_variable = "OTEL_EXPORTER_OTLP_PROTOCOL";
    protocol = get(protocol_variable);
  }
  if (protocol == "http/json") {
    settings.encoding = SpanExporter::Encoding::kJson;
  } else if (!protocol.empty() && protocol != "http/protobuf") {
    return absl::InvalidArgumentError(
        absl::StrCat(protocol_variable, "=", protocol.substr(0, 64),
                     ": want http/protobuf (the default) or http/json (no OTLP/gRPC here)"));
  }
  if (!flag_endpoint.empty()) {
    ASSIGN_OR_RETURN(settings.target, ParseOtlpEndpoint(flag_endpoint));
  } else if (const std::string traces = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
             !traces.empty()) {
    ASSIGN_OR_RETURN(settings.target, ParseOtlpEndpoint(traces, OtlpEndpointKind::kTraces,
                                                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"));
  } else if (const std::string base = get("OTEL_EXPORTER_OTLP_ENDPOINT"); !base.empty()) {
    ASSIGN_OR_RETURN(settings.target, ParseOtlpEndpoint(base, OtlpEndpointKind::kBase,
                                                        "OTEL_EXPORTER_OTLP_ENDPOINT"));
  }
  if (settings.target.has_value()) {
    settings.target->content_type = settings.encoding == SpanExporter::Encoding::kProtobuf
                                        ? "application/x-protobuf"
                                        : "application/json";
  }
  return settings;
}

SpanExporter::PostFn OtlpHttpPost(OtlpTarget target) {
  return [target = std::move(target)](const std::string& body, absl::Duration timeout) {
    return Post(target, body, timeout);
  };
}

}  // namespace tensorops
