// What the HTTP transport (server/http/http_transport.h) and the routes
// above it (server/http/oip_routes.h) exchange, and nothing else: a request
// read whole, its answer, and the seam between them,
// HttpHandler = Route(request, executor, reply). No Boost here: the routes
// know no sockets, and the transport no protocol.
//
// Thread-safety: plain values, used by one thread at a time.
#ifndef TENSOROPS_SERVER_HTTP_HTTP_MESSAGE_H_
#define TENSOROPS_SERVER_HTTP_HTTP_MESSAGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/core/admission.h"
#include "server/http/request_body.h"

namespace tensorops {

// The methods the routes tell apart; any other is kOther.
enum class HttpMethod { kOther, kGet, kHead, kPost };

// One request as the router sees it, whatever the connection (HTTP or
// HTTPS).
struct HttpRequest {
  HttpMethod method = HttpMethod::kOther;
  std::string target;  // as sent: origin form ("/v2/x?y") or absolute form
  // In the order received, names as sent (looked up case-insensitively).
  std::vector<std::pair<std::string, std::string>> headers;
  BodyBytes body;

  // The first header named `name` (any case), as HTTP fields are looked up.
  std::optional<absl::string_view> FindHeader(absl::string_view name) const;
  std::optional<std::string> Header(absl::string_view name) const {
    std::optional<absl::string_view> v = FindHeader(name);
    if (!v.has_value()) return std::nullopt;
    return std::string(*v);
  }
};

// An answer's body: small text (`text`, the endpoints but infer), or an
// infer's JSON text then each binary output (`parts`, whose bytes `owner`
// keeps), written in one gather write straight from where they are (no copy
// into a send buffer).
struct HttpBody {
  std::string text;
  std::vector<absl::string_view> parts;  // after `text`, in order
  std::shared_ptr<const void> owner;     // holds what `parts` view

  uint64_t size() const;
};

// One answer. Written by the connection's loop.
struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type first
  HttpBody body;
  bool close = false;  // close the connection after it
  // An infer's admission ticket, held for the answer's bytes until they are
  // written (the connection gives it back then), as gRPC holds it until
  // OnDone.
  AdmissionTicket ticket;
};

// A refusal the server decided with a google.rpc.RetryInfo (admission,
// drain: wire/status_details.h) tells the client when to come back, in
// HTTP's whole seconds (RFC 9110 Retry-After), rounded up.
void AddRetryAfter(std::optional<absl::Duration> delay, HttpResponse* r);

// Called once per request, on the connection's loop thread.
using Reply = std::function<void(HttpResponse)>;
// Runs a function on the connection's loop thread, later (never inline):
// an answer finished on another thread comes back through it.
using HttpExecutor = std::function<void(std::function<void()>)>;
// Route(request, executor, reply): every request read whole, on its
// connection's loop thread; answers through `reply`, once, on that thread.
using HttpHandler = std::function<void(HttpRequest, HttpExecutor, Reply)>;

// What the transport needs of the protocol above it: the handler, and how
// that protocol words the answers the transport gives on its own (a request
// it cannot read or take: 400, 408, 413, 431, 503).
struct HttpProtocol {
  HttpHandler route;
  // An error answer with HTTP status `status` saying `why`.
  std::function<HttpResponse(int status, absl::string_view why)> error;
  // The HTTP status of a refusal from the in-flight budget (a body the
  // budget cannot take).
  std::function<int(const absl::Status&)> status_of;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_HTTP_MESSAGE_H_
