#include "server/http/otlp_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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
  request.set(http::field::content_type, "application/json");
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

absl::StatusOr<OtlpTarget> ParseOtlpEndpoint(absl::string_view endpoint) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp_endpoint=", endpoint.substr(0, 200), ": ", why,
                     " (want http://HOST:PORT, e.g. http://otel-collector:4318)"));
  };
  absl::string_view rest = endpoint;
  if (!absl::ConsumePrefix(&rest, "http://")) return invalid("not an http:// URL");
  OtlpTarget target;
  const size_t slash = rest.find('/');
  const absl::string_view authority = rest.substr(0, slash);
  const absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  // The signal's path on a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT.
  target.path = path.empty() || path == "/" ? "/v1/traces" : std::string(path);
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

SpanExporter::PostFn OtlpHttpPost(OtlpTarget target) {
  return [target = std::move(target)](const std::string& body, absl::Duration timeout) {
    return Post(target, body, timeout);
  };
}

}  // namespace tensorops
