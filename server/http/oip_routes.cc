#include "server/http/oip_routes.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http/http_call_context.h"
#include "server/http/infer_call.h"
#include "server/http/json_binding.h"
#include "server/http/oip_json.h"

namespace tensorops {
namespace {

// evhttp_uridecode's rule (the first transport's): %XX becomes its byte, a
// '%' not followed by two hex digits stays as it is, '+' stays '+'.
std::string PercentDecode(absl::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = absl::ascii_tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The path of a request target: origin form ("/v2/x?y") or absolute form
// ("http://host/v2/x"); the query is not part of it.
absl::string_view TargetPath(absl::string_view target) {
  if (!absl::StartsWith(target, "/")) {
    const size_t scheme = target.find("://");
    if (scheme == absl::string_view::npos) return "";
    const size_t slash = target.find('/', scheme + 3);
    target = slash == absl::string_view::npos ? "/" : target.substr(slash);
  }
  return target.substr(0, target.find_first_of("?#"));
}

// The path's segments, percent-decoded after the split (Triton's clients
// quote model and region names; an encoded '/' stays inside its segment).
std::vector<std::string> Segments(absl::string_view path) {
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (std::string& part : parts) {
    if (part.find('%') != std::string::npos) part = PercentDecode(part);
  }
  return parts;
}

// One request on its way through the routes.
struct RouteCall {
  CallPipeline* pipeline;
  OipService* oip;
  const CallMethod* infer_method;
  HttpRequest request;
  HttpExecutor loop;
  Reply reply;
  std::string path;                // as sent, for messages
  std::vector<std::string> parts;  // its segments, decoded
  std::vector<std::string> args;   // the route pattern's {} segments, in order
  std::optional<std::string> authorization;

  void Send(int code, std::string json) { reply(JsonResponse(code, std::move(json))); }
  void SendError(const absl::Status& status) { reply(ErrorResponse(status)); }
  // An OipService answer: its error, or 200 and its value in JSON.
  template <class T, class ToJson>
  void SendValue(const absl::StatusOr<T>& value, ToJson to_json) {
    if (!value.ok()) return SendError(value.status());
    Send(200, to_json(*value));
  }
  // The pattern's first {} and, when the path has /versions/{v}, its second.
  const std::string& model() const { return args[0]; }
  std::string version() const { return args.size() > 1 ? args[1] : ""; }
  // /v2/systemsharedmemory[/region/{r}]/...: "" without a region.
  std::string region() const { return args.empty() ? "" : args[0]; }
  std::string owner() const { return oip->ShmOwner(authorization); }
};

void NotFound(RouteCall& c) {
  c.Send(404, ErrorJson(absl::StrCat("no endpoint ", c.path.substr(0, 200))));
}

// The handlers, one per endpoint. Open endpoints: health (as
// grpc.health.v1 and ServerLive/ServerReady).

void HealthLive(RouteCall& c) { c.Send(200, R"({"live":true})"); }

void HealthReady(RouteCall& c) {
  // Not ready is 503 here (probes read the status); gRPC's ServerReady answers OK, false.
  return c.oip->ServerReady() ? c.Send(200, R"({"ready":true})")
                              : c.Send(503, R"({"ready":false})");
}

void ServerMetadata(RouteCall& c) {
  c.Send(200, ServerMetadataJson(c.oip->ServerMetadata(OipDoor::kRest)));
}

void RepositoryIndex(RouteCall& c) {
  // The body ({"ready": bool}) is not read: every model is ready.
  c.Send(200, RepositoryIndexJson(c.oip->RepositoryIndex(/*ready_only=*/false)));
}

// /v2/repository/models/{m}/(load|unload).
void LoadUnload(RouteCall& c) {
  c.Send(501,
         ErrorJson(absl::StrCat("model '", c.model(), "': ops are built in and always loaded; ",
                                c.parts.back(), " is not supported")));
}

// Shared memory off, REST lists nothing and refuses changes with 501 (as
// Triton); gRPC answers each RPC UNAVAILABLE (ShmRegistry's own message).
void ShmStatus(RouteCall& c) {
  if (!c.oip->shm_enabled()) return c.Send(200, "[]");
  c.SendValue(c.oip->SystemSharedMemoryStatus(c.owner(), c.region()), ShmStatusJson);
}

void ShmOff(RouteCall& c) {
  c.Send(501, ErrorJson("system shared memory is off on this server (--shared_memory=system)"));
}

void ShmRegister(RouteCall& c) {
  if (!c.oip->shm_enabled()) return ShmOff(c);
  if (c.region().empty()) return NotFound(c);
  absl::StatusOr<ShmRegisterBody> b = ParseRegisterBody(c.request.body.view());
  absl::Status s = b.ok() ? c.oip->SystemSharedMemoryRegister(c.owner(), c.region(), b->key,
                                                              b->offset, b->byte_size)
                          : b.status();
  if (!s.ok()) return c.SendError(s);
  c.Send(200, "{}");
}

void ShmUnregister(RouteCall& c) {
  if (!c.oip->shm_enabled()) return ShmOff(c);
  absl::Status s = c.oip->SystemSharedMemoryUnregister(c.owner(), c.region());
  if (!s.ok()) return c.SendError(s);
  c.Send(200, "{}");
}

void AllStats(RouteCall& c) { c.SendValue(c.oip->ModelStatistics("", ""), StatsJson); }

void ModelMetadata(RouteCall& c) {
  c.SendValue(c.oip->ModelMetadata(c.model(), c.version()), ModelMetadataJson);
}

void ModelReady(RouteCall& c) {
  c.SendValue(c.oip->Model(c.model(), c.version()),
              [](const OpDef* def) { return ModelReadyJson(*def); });
}

void ModelStats(RouteCall& c) {
  c.SendValue(c.oip->ModelStatistics(c.model(), c.version()), StatsJson);
}

void Infer(RouteCall& c) {
  StartInferCall(c.pipeline, c.infer_method, c.oip, std::move(c.request), std::move(c.loop),
                 std::move(c.reply), c.model(), c.version());
}

// GET answers HEAD too (the transport sends the length, no body).
enum class Verb { kGet, kPost };
// kToken: the bearer token and the drain gate first; kOpen: neither;
// kCall: the infer's Call checks both (Call::Open), once, so that a refused
// infer is counted in the metrics as a refused ModelInfer is (with another
// method than its verb: kToken, then 405).
enum class Access { kOpen, kToken, kCall };

struct Row {
  Verb verb;
  const char* pattern;  // "/v2/models/{}/ready": {} is any one segment
  Access access;
  void (*handler)(RouteCall&);
};

// In order: the first pattern that matches is the route. Infer, the hot
// path, first (no other pattern matches its paths).
constexpr Row kRows[] = {
    {Verb::kPost, "/v2/models/{}/infer", Access::kCall, Infer},
    {Verb::kPost, "/v2/models/{}/versions/{}/infer", Access::kCall, Infer},
    {Verb::kGet, "/v2/health/live", Access::kOpen, HealthLive},
    {Verb::kGet, "/v2/health/ready", Access::kOpen, HealthReady},
    {Verb::kGet, "/v2", Access::kToken, ServerMetadata},
    {Verb::kPost, "/v2/repository/index", Access::kToken, RepositoryIndex},
    {Verb::kPost, "/v2/repository/models/{}/load", Access::kToken, LoadUnload},
    {Verb::kPost, "/v2/repository/models/{}/unload", Access::kToken, LoadUnload},
    {Verb::kGet, "/v2/systemsharedmemory/status", Access::kToken, ShmStatus},
    {Verb::kGet, "/v2/systemsharedmemory/region/{}/status", Access::kToken, ShmStatus},
    {Verb::kPost, "/v2/systemsharedmemory/register", Access::kToken, ShmRegister},
    {Verb::kPost, "/v2/systemsharedmemory/region/{}/register", Access::kToken, ShmRegister},
    {Verb::kPost, "/v2/systemsharedmemory/unregister", Access::kToken, ShmUnregister},
    {Verb::kPost, "/v2/systemsharedmemory/region/{}/unregister", Access::kToken, ShmUnregister},
    {Verb::kGet, "/v2/models/stats", Access::kToken, AllStats},
    {Verb::kGet, "/v2/models/{}", Access::kToken, ModelMetadata},
    {Verb::kGet, "/v2/models/{}/versions/{}", Access::kToken, ModelMetadata},
    {Verb::kGet, "/v2/models/{}/ready", Access::kToken, ModelReady},
    {Verb::kGet, "/v2/models/{}/versions/{}/ready", Access::kToken, ModelReady},
    {Verb::kGet, "/v2/models/{}/stats", Access::kToken, ModelStats},
    {Verb::kGet, "/v2/models/{}/versions/{}/stats", Access::kToken, ModelStats},
};

// Whether `parts` are `pattern`'s segments; its {} segments go to `args`.
bool Matches(absl::string_view pattern, const std::vector<std::string>& parts,
             std::vector<std::string>* args) {
  args->clear();
  size_t i = 0;
  for (absl::string_view want : absl::StrSplit(pattern, '/', absl::SkipEmpty())) {
    if (i == parts.size()) return false;
    if (want == "{}") {
      args->push_back(parts[i]);
    } else if (want != parts[i]) {
      return false;
    }
    ++i;
  }
  return i == parts.size();
}

const Row* FindRow(const std::vector<std::string>& parts, std::vector<std::string>* args) {
  for (const Row& row : kRows) {
    if (Matches(row.pattern, parts, args)) return &row;
  }
  return nullptr;
}

bool Fits(Verb verb, HttpMethod method) {
  if (verb == Verb::kPost) return method == HttpMethod::kPost;
  return method == HttpMethod::kGet || method == HttpMethod::kHead;
}

void WrongMethod(RouteCall& c, Verb verb) {
  const char* allowed = verb == Verb::kPost ? "POST" : "GET";
  HttpResponse r = JsonResponse(405, ErrorJson(absl::StrCat(c.path, " takes ", allowed)));
  r.headers.emplace_back("Allow", allowed);
  c.reply(std::move(r));
}

}  // namespace

void OipRoutes::Route(HttpRequest request, HttpExecutor loop, Reply reply) const {
  std::string path(TargetPath(request.target));
  std::vector<std::string> parts = Segments(path);
  std::optional<std::string> authorization = request.Header("Authorization");
  RouteCall c{pipeline_,
              oip_,
              infer_method_,
              std::move(request),
              std::move(loop),
              std::move(reply),
              std::move(path),
              std::move(parts),
              {},
              std::move(authorization)};
  if (c.parts.empty() || c.parts[0] != "v2") return NotFound(c);
  const Row* row = FindRow(c.parts, &c.args);
  const bool fits = row != nullptr && Fits(row->verb, c.request.method);
  const bool gated =
      row == nullptr || row->access == Access::kToken || (row->access == Access::kCall && !fits);
  if (gated) {
    if (absl::Status gate = Gate(*pipeline_, c.authorization); !gate.ok()) return c.SendError(gate);
  }
  if (row == nullptr) return NotFound(c);
  if (!fits) return WrongMethod(c, row->verb);
  row->handler(c);
}

}  // namespace tensorops
