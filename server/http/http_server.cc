#include "server/http/http_server.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/status_macros.h"
#include "kernels/tensor.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/core/logging.h"
#include "server/http/json_binding.h"
#include "server/oip/oip_codec.h"
#include "wire/status.h"

#ifndef TENSOROPS_VERSION
#error "TENSOROPS_VERSION must be defined by the build (server/http/CMakeLists.txt)"
#endif

namespace tensorops {
namespace {

using JsonOut = rapidjson::Writer<rapidjson::StringBuffer>;

absl::string_view Bytes(const std::string& s) { return s; }
absl::string_view Bytes(const Tensor& t) {
  return absl::string_view(t.data_as<char>(), static_cast<size_t>(t.num_bytes()));
}

// Hands `value`'s bytes (JSON text, or a binary output's tensor) to evhttp
// without copying: the buffer owns `value` until they are sent.
template <typename T>
void AddOwned(evbuffer* buf, T value) {
  if (Bytes(value).empty()) return;
  auto* owned = new T(std::move(value));
  const absl::string_view bytes = Bytes(*owned);
  evbuffer_add_reference(
      buf, bytes.data(), bytes.size(),
      [](const void*, size_t, void* arg) { delete static_cast<T*>(arg); }, owned);
}

void Send(evhttp_request* req, int code, std::string json,
          const char* content_type = "application/json") {
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  evhttp_add_header(headers, "Content-Type", content_type);
  evbuffer* buf = evbuffer_new();
  AddOwned(buf, std::move(json));
  evhttp_send_reply(req, code, nullptr, buf);
  evbuffer_free(buf);
}

void SendError(evhttp_request* req, const absl::Status& status) {
  Send(req, HttpStatusOf(status), ErrorJson(status.message()));
}

std::string Json(absl::FunctionRef<void(JsonOut&)> fill) {
  rapidjson::StringBuffer buffer;
  JsonOut w(buffer);
  fill(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

void Str(JsonOut& w, absl::string_view s) { w.String(s.data(), s.size()); }

std::optional<std::string> Header(evhttp_request* req, const char* name) {
  const char* v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

void DescribeTensor(JsonOut& w, absl::string_view name, absl::string_view datatype,
                    const std::vector<int64_t>& shape) {
  w.StartObject();
  w.Key("name");
  Str(w, name);
  w.Key("datatype");
  Str(w, datatype);
  w.Key("shape");
  w.StartArray();
  for (int64_t d : shape) w.Int64(d);
  w.EndArray();
  w.EndObject();
}

// As the gRPC binding's DescribeModel (server/grpc/oip_binding.h).
std::string ModelMetadataJson(const OpDef& def) {
  return Json([&](JsonOut& w) {
    w.StartObject();
    w.Key("name");
    Str(w, def.spec.name);
    w.Key("versions");
    w.StartArray();
    Str(w, kModelVersion);
    w.EndArray();
    w.Key("platform");
    Str(w, "tensorops");
    w.Key("inputs");
    w.StartArray();
    for (const InputSpec& in : def.spec.inputs) {
      std::vector<int64_t> shape;
      if (in.max_rank >= 0 && in.max_rank == in.min_rank) {
        shape.assign(static_cast<size_t>(in.max_rank), -1);
      } else {
        shape = {-1};  // any rank
      }
      DescribeTensor(w, in.name, RepresentativeDatatype(in.types), shape);
    }
    w.EndArray();
    w.Key("outputs");
    w.StartArray();
    const InputSpec& data = def.spec.inputs.front();
    for (const OutputSpec& out : def.spec.outputs) {
      DescribeTensor(w, out.name, RepresentativeDatatype(data.types), {-1});
    }
    w.EndArray();
    w.EndObject();
  });
}

// {"model_stats": [...]}, as the gRPC ModelStatistics (the same totals).
std::string StatsJson(const Metrics& metrics, const std::vector<const OpDef*>& defs) {
  auto ns = [](double seconds) { return static_cast<uint64_t>(seconds * 1e9); };
  auto duration = [](JsonOut& w, const char* name, uint64_t count, uint64_t nanos) {
    w.Key(name);
    w.StartObject();
    w.Key("count");
    w.Uint64(count);
    w.Key("ns");
    w.Uint64(nanos);
    w.EndObject();
  };
  return Json([&](JsonOut& w) {
    w.StartObject();
    w.Key("model_stats");
    w.StartArray();
    for (const OpDef* def : defs) {
      const Metrics::OpTotals t = metrics.ReadOpTotals(metrics.OpIndex(def->spec.name));
      w.StartObject();
      w.Key("name");
      Str(w, def->spec.name);
      w.Key("version");
      Str(w, kModelVersion);
      w.Key("last_inference");
      w.Uint64(static_cast<uint64_t>(t.last_call_unix_seconds * 1e3));
      w.Key("inference_count");
      w.Uint64(t.success_count);
      w.Key("execution_count");
      w.Uint64(t.kernel_count);
      w.Key("inference_stats");
      w.StartObject();
      duration(w, "success", t.success_count, ns(t.success_seconds));
      duration(w, "fail", t.fail_count, ns(t.fail_seconds));
      duration(w, "queue", t.queue_count, ns(t.queue_seconds));
      duration(w, "compute_input", 0, 0);
      duration(w, "compute_infer", t.kernel_count, ns(t.kernel_seconds));
      duration(w, "compute_output", 0, 0);
      w.EndObject();
      w.Key("batch_stats");
      w.StartArray();
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

struct ShmRegisterBody {
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

absl::StatusOr<ShmRegisterBody> ParseRegisterBody(absl::string_view body) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.data(),
                                                                                    body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(
        "the register body must be a JSON object {\"key\", \"offset\", \"byte_size\"}");
  }
  ShmRegisterBody out;
  auto key = doc.FindMember("key");
  if (key == doc.MemberEnd() || !key->value.IsString()) {
    return absl::InvalidArgumentError("register: key must be a string");
  }
  out.key.assign(key->value.GetString(), key->value.GetStringLength());
  for (const char* field : {"offset", "byte_size"}) {
    auto it = doc.FindMember(field);
    if (it == doc.MemberEnd()) {
      if (std::string(field) == "offset") continue;
      return absl::InvalidArgumentError("register: byte_size is missing");
    }
    if (!it->value.IsUint64()) {
      return absl::InvalidArgumentError(
          absl::StrCat("register: ", field, " must be an integer >= 0"));
    }
    (std::string(field) == "offset" ? out.offset : out.byte_size) = it->value.GetUint64();
  }
  return out;
}

absl::string_view Body(evhttp_request* req) {
  evbuffer* input = evhttp_request_get_input_buffer(req);
  const size_t length = evbuffer_get_length(input);
  if (length == 0) return "";
  return absl::string_view(reinterpret_cast<const char*>(evbuffer_pullup(input, -1)), length);
}

}  // namespace

// One infer, from its request to its answer. Owned by the loop: deleted in
// Reply, on the loop thread, after the answer is handed to evhttp (which
// gives the admission ticket back, as a gRPC reactor's OnDone does).
class HttpServer::InferCall {
 public:
  InferCall(HttpServer* server, evhttp_request* req)
      : server_(server),
        req_(req),
        base_(evhttp_connection_get_base(evhttp_request_get_connection(req))) {}

  void Start(const std::string& model, const std::string& version) {
    evbuffer* input = evhttp_request_get_input_buffer(req_);
    const size_t length = evbuffer_get_length(input);
    // One contiguous body: tensors are used in place from here on. libevent
    // 2.1 reads 4 KiB at a time, so a big body is thousands of chains: it is
    // copied once into a buffer big calls reuse (BufferCache) instead of
    // evbuffer_pullup's fresh allocation, whose first touch cost more than
    // the copy.
    const char* bytes = "";
    if (length > 0 && evbuffer_peek(input, -1, nullptr, nullptr, 0) == 1) {
      bytes = reinterpret_cast<const char*>(evbuffer_pullup(input, -1));
    } else if (length > 0) {
      body_copy_ = Tensor(DType::kUInt8, {static_cast<int64_t>(length)});
      evbuffer_copyout(input, body_copy_.mutable_data(), length);
      bytes = body_copy_.data_as<char>();
    }
    body_ = absl::string_view(bytes, length);
    std::optional<int64_t> header_length;
    absl::Status header_status;
    if (std::optional<std::string> h = Header(req_, "Inference-Header-Content-Length")) {
      int64_t l = 0;
      if (!absl::SimpleAtoi(*h, &l)) {
        header_status =
            absl::InvalidArgumentError("Inference-Header-Content-Length must be a decimal integer");
      }
      header_length = l;
    }
    if (std::optional<std::string> e = Header(req_, "Content-Encoding");
        e.has_value() && *e != "identity") {
      Send(req_, 415,
           ErrorJson(absl::StrCat("Content-Encoding '", *e, "' is not supported; send identity")));
      delete this;
      return;
    }
    call_ = std::make_unique<Call>(
        server_->pipeline_, CallMethod::kRest, Header(req_, "Authorization"),
        absl::InfiniteFuture(), [this](const grpc::Status& s) {
          status_ = FromGrpcStatus(s);
          // Back to the loop thread, which alone may touch evhttp.
          event_base_once(
              base_, -1, EV_TIMEOUT,
              [](evutil_socket_t, short, void* self) { static_cast<InferCall*>(self)->Reply(); },
              this, nullptr);
        });
    call_->RunUnary(
        model, static_cast<int64_t>(length),
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          // The path's model first: an unknown one is 404 whatever the body.
          RETURN_IF_ERROR(FindModel(server_->pipeline_->registry(), model, version).status());
          RETURN_IF_ERROR(header_status);
          ASSIGN_OR_RETURN(parsed_, JsonInferRequest::Parse(body_, header_length, model, version,
                                                            server_->pipeline_->limits()));
          ASSIGN_OR_RETURN(
              std::unique_ptr<PreparedInfer> prepared,
              PreparedInfer::Make(server_->pipeline_->registry(), parsed_->request(),
                                  server_->pipeline_->limits(), server_->shm_, Owner()));
          return std::make_unique<Prepared>(this, std::move(prepared));
        },
        [this] {
          int64_t n = static_cast<int64_t>(json_.size());
          for (const Tensor& b : binary_) n += b.num_bytes();
          return n;
        });
  }

 private:
  // Runs the kernel into the response and encodes it, on the pool thread.
  class Prepared final : public PreparedCall {
   public:
    Prepared(InferCall* call, std::unique_ptr<PreparedInfer> p)
        : call_(call), prepared_(std::move(p)) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    absl::Duration timeout() const override { return prepared_->timeout(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      RETURN_IF_ERROR(prepared_->Run(&call_->response_, pool, min_parallel_bytes));
      return call_->response_.Encode(*call_->parsed_, &call_->json_, &call_->binary_);
    }

   private:
    InferCall* const call_;
    std::unique_ptr<PreparedInfer> prepared_;
  };

  // Shared-memory regions belong to the caller's Authorization value when
  // tokens are on (as on gRPC, so both doors see the same regions).
  std::string Owner() const {
    if (!server_->tokens_required_) return "";
    return Header(req_, "Authorization").value_or("");
  }

  void Reply() {
    if (!status_.ok()) {
      SendError(req_, status_);
    } else {
      evkeyvalq* headers = evhttp_request_get_output_headers(req_);
      evbuffer* buf = evbuffer_new();
      if (binary_.empty()) {
        evhttp_add_header(headers, "Content-Type", "application/json");
      } else {
        evhttp_add_header(headers, "Content-Type", "application/octet-stream");
        evhttp_add_header(headers, "Inference-Header-Content-Length",
                          absl::StrCat(json_.size()).c_str());
      }
      AddOwned(buf, std::move(json_));
      for (Tensor& b : binary_) AddOwned(buf, std::move(b));
      evhttp_send_reply(req_, 200, nullptr, buf);
      evbuffer_free(buf);
    }
    delete this;  // ~Call gives the admission ticket back
  }

  HttpServer* const server_;
  evhttp_request* const req_;
  event_base* const base_;  // the loop of the request's connection
  absl::string_view body_;
  Tensor body_copy_;  // the body, when it came in several chains
  std::unique_ptr<JsonInferRequest> parsed_;
  JsonInferResponse response_;
  std::string json_;
  std::vector<Tensor> binary_;
  absl::Status status_;
  std::unique_ptr<Call> call_;
};

HttpServer::HttpServer(CallPipeline* pipeline, ShmRegistry* shm) : pipeline_(pipeline), shm_(shm) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(CallPipeline* pipeline,
                                                              ShmRegistry* shm,
                                                              const Options& options) {
  static std::once_flag process_once;
  std::call_once(process_once, [] {
    evthread_use_pthreads();
    // libevent (writev) and OpenSSL's socket BIO (write) do not pass
    // MSG_NOSIGNAL: a write to a connection the client has reset can raise
    // SIGPIPE, whose default ends the process. A handler the process set is
    // kept.
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
  std::unique_ptr<HttpServer> s(new HttpServer(pipeline, shm));
  s->tokens_required_ = options.tokens_required;
  s->tls_ = options.tls;
  int loops = options.loops;
  if (loops <= 0) {
    loops = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxDefaultLoops);
  }
  evutil_socket_t listen_fd = -1;
  for (int i = 0; i < loops; ++i) {
    Loop& loop = s->loops_.emplace_back();
    loop.base = event_base_new();
    if (loop.base == nullptr) return absl::InternalError("event_base_new failed");
    loop.http = evhttp_new(loop.base);
    if (loop.http == nullptr) return absl::InternalError("evhttp_new failed");
    evhttp_set_max_body_size(loop.http, options.max_body_bytes);
    evhttp_set_max_headers_size(loop.http, 64 << 10);
    evhttp_set_allowed_methods(loop.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(loop.http, &HttpServer::OnRequest, s.get());
    evhttp_set_bevcb(loop.http, &HttpServer::NewConnection, s.get());
    if (i == 0) {
      evhttp_bound_socket* bound = evhttp_bind_socket_with_handle(
          loop.http, options.host.c_str(), static_cast<ev_uint16_t>(options.port));
      if (bound == nullptr) {
        return absl::UnavailableError(
            absl::StrCat("cannot listen for HTTP on ", options.host, ":", options.port));
      }
      listen_fd = evhttp_bound_socket_get_fd(bound);
      continue;
    }
    // The other loops accept on a duplicate of the same socket (each
    // listener closes its own descriptor); the kernel hands each connection
    // to one of them.
    const evutil_socket_t fd = dup(listen_fd);
    if (fd < 0 || evhttp_accept_socket_with_handle(loop.http, fd) == nullptr) {
      if (fd >= 0) close(fd);
      return absl::InternalError("cannot share the HTTP socket with another event loop");
    }
  }
  // No Nagle: a reply's last partial segment must not wait for the client's
  // delayed ACK (40 ms a call with binary replies of 64 KiB). Linux gives
  // accepted sockets the listening socket's TCP_NODELAY.
  const int one = 1;
  setsockopt(listen_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError("getsockname failed on the HTTP socket");
  }
  s->port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  for (Loop& loop : s->loops_) {
    loop.thread =
        std::thread([base = loop.base] { event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY); });
  }
  return s;
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (Loop& loop : loops_) {
    if (loop.thread.joinable()) {
      event_base_loopbreak(loop.base);
      loop.thread.join();
    }
  }
  for (Loop& loop : loops_) {
    if (loop.http != nullptr) evhttp_free(loop.http);
    loop.http = nullptr;
  }
}

HttpServer::~HttpServer() {
  Stop();
  for (Loop& loop : loops_) {
    if (loop.base != nullptr) event_base_free(loop.base);
  }
}

namespace {

// libevent 2.1 reads at most 4 KiB and writes at most 16 KiB a callback by
// default: a 64 KiB body took 16 trips through the loop (REST was 0.5x of
// gRPC there). Bodies are up to --max_message_bytes; a 1 MiB step keeps one
// connection from holding its loop long.
constexpr size_t kMaxSingleIo = size_t{1} << 20;

bufferevent* WithLargeIo(bufferevent* bev) {
  if (bev != nullptr) {
    bufferevent_set_max_single_read(bev, kMaxSingleIo);
    bufferevent_set_max_single_write(bev, kMaxSingleIo);
  }
  return bev;
}

}  // namespace

bufferevent* HttpServer::NewConnection(event_base* base, void* self) {
  if (static_cast<HttpServer*>(self)->tls_ != nullptr) {
    return WithLargeIo(NewTlsConnection(base, self));
  }
  return WithLargeIo(bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE));
}

// evhttp asks for each accepted connection's bufferevent; the socket is
// attached after. The TLS handshake runs first, as the server, and evhttp
// reads HTTP/1.1 from what it decrypts; a failed handshake is an error event
// on which evhttp closes the connection. Freeing the bufferevent frees the
// SSL and closes the socket.
bufferevent* HttpServer::NewTlsConnection(event_base* base, void* self) {
  SSL* ssl = SSL_new(static_cast<HttpServer*>(self)->tls_.get());
  if (ssl == nullptr) {
    // Only out of memory. evhttp then makes a plaintext bufferevent of its
    // own, which Handle refuses to answer on.
    Log(LogLevel::kError, "HTTPS: SSL_new failed");
    return nullptr;
  }
  bufferevent* bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                    BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) {
    SSL_free(ssl);
    Log(LogLevel::kError, "HTTPS: bufferevent_openssl_socket_new failed");
    return nullptr;
  }
  // A client that closes the TCP connection without TLS's close_notify (most
  // do after their last answer) is an end of stream, not an error.
  bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  return bev;
}

void HttpServer::OnRequest(evhttp_request* req, void* self) {
  static_cast<HttpServer*>(self)->Handle(req);
}

void HttpServer::Handle(evhttp_request* req) {
  if (tls_ != nullptr && bufferevent_openssl_get_ssl(evhttp_connection_get_bufferevent(
                             evhttp_request_get_connection(req))) == nullptr) {
    // NewTlsConnection failed and evhttp fell back to plaintext: nothing but
    // this refusal goes out in the clear.
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    return Send(req, 503, ErrorJson("this port speaks HTTPS only"));
  }
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  const char* raw_path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
  const std::string path = raw_path == nullptr ? "" : raw_path;
  // Segments percent-decoded after the split (Triton's clients quote model
  // and region names; an encoded '/' stays inside its segment).
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (std::string& part : parts) {
    if (part.find('%') == std::string::npos) continue;
    size_t size = 0;
    char* decoded = evhttp_uridecode(part.c_str(), 0, &size);
    if (decoded != nullptr) {
      part.assign(decoded, size);
      free(decoded);
    }
  }
  const bool get = method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD;
  const bool post = method == EVHTTP_REQ_POST;
  auto wrong_method = [&](const char* allowed) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allowed);
    Send(req, 405, ErrorJson(absl::StrCat(path, " takes ", allowed)));
  };
  auto not_found = [&] {
    Send(req, 404, ErrorJson(absl::StrCat("no endpoint ", path.substr(0, 200))));
  };
  if (parts.empty() || parts[0] != "v2") return not_found();

  // Open endpoints: health (as grpc.health.v1 and ServerLive/ServerReady).
  if (parts.size() == 3 && parts[1] == "health" && (parts[2] == "live" || parts[2] == "ready")) {
    if (!get) return wrong_method("GET");
    if (parts[2] == "live") return Send(req, 200, R"({"live":true})");
    return pipeline_->draining() ? Send(req, 503, R"({"ready":false})")
                                 : Send(req, 200, R"({"ready":true})");
  }

  // Everything else: the bearer token and the drain gate.
  const std::optional<std::string> authorization = Header(req, "Authorization");
  const std::string auth_value = authorization.value_or("");
  const absl::string_view auth_view = auth_value;
  if (absl::Status gate = pipeline_->Gate(authorization.has_value() ? &auth_view : nullptr);
      !gate.ok()) {
    return SendError(req, gate);
  }

  if (parts.size() == 1) {
    if (!get) return wrong_method("GET");
    return Send(req, 200, Json([&](JsonOut& w) {
                  w.StartObject();
                  w.Key("name");
                  Str(w, "tensorops");
                  w.Key("version");
                  Str(w, TENSOROPS_VERSION);
                  w.Key("extensions");
                  w.StartArray();
                  Str(w, "binary_tensor_data");
                  Str(w, "statistics");
                  Str(w, "model_repository");
                  if (shm_->enabled()) Str(w, "system_shared_memory");
                  w.EndArray();
                  w.EndObject();
                }));
  }
  if (parts[1] == "repository") {
    if (parts.size() == 3 && parts[2] == "index") {
      if (!post) return wrong_method("POST");
      return Send(req, 200, Json([&](JsonOut& w) {
                    w.StartArray();
                    for (const auto& def : pipeline_->registry().ops()) {
                      w.StartObject();
                      w.Key("name");
                      Str(w, def->spec.name);
                      w.Key("version");
                      Str(w, kModelVersion);
                      w.Key("state");
                      Str(w, "READY");
                      w.Key("reason");
                      Str(w, "");
                      w.EndObject();
                    }
                    w.EndArray();
                  }));
    }
    if (parts.size() == 5 && parts[2] == "models" && (parts[4] == "load" || parts[4] == "unload")) {
      if (!post) return wrong_method("POST");
      return Send(
          req, 501,
          ErrorJson(absl::StrCat("model '", parts[3], "': ops are built in and always loaded; ",
                                 parts[4], " is not supported")));
    }
    return not_found();
  }
  if (parts.size() >= 2 && parts[1] == "systemsharedmemory") {
    // /v2/systemsharedmemory[/region/{r}]/(status|register|unregister)
    std::string region;
    size_t at2 = 2;
    if (parts.size() >= 4 && parts[2] == "region") {
      region = parts[3];
      at2 = 4;
    }
    if (parts.size() != at2 + 1) return not_found();
    const std::string& verb = parts[at2];
    const std::string owner = tokens_required_ ? authorization.value_or("") : "";
    if (verb == "status") {
      if (!get) return wrong_method("GET");
      if (!shm_->enabled()) return Send(req, 200, "[]");
      absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> regions =
          shm_->List(owner, region);
      if (!regions.ok()) return SendError(req, regions.status());
      return Send(req, 200, Json([&](JsonOut& w) {
                    w.StartArray();
                    for (const auto& r : *regions) {
                      w.StartObject();
                      w.Key("name");
                      Str(w, r->name());
                      w.Key("key");
                      Str(w, r->key());
                      w.Key("offset");
                      w.Uint64(r->offset());
                      w.Key("byte_size");
                      w.Uint64(r->byte_size());
                      w.EndObject();
                    }
                    w.EndArray();
                  }));
    }
    if (verb != "register" && verb != "unregister") return not_found();
    if (!post) return wrong_method("POST");
    if (!shm_->enabled()) {
      return Send(req, 501,
                  ErrorJson("system shared memory is off on this server (--shared_memory=system)"));
    }
    absl::Status s;
    if (verb == "unregister") {
      s = shm_->Unregister(owner, region);
    } else {
      if (region.empty()) return not_found();
      absl::StatusOr<ShmRegisterBody> b = ParseRegisterBody(Body(req));
      s = b.ok() ? shm_->Register(owner, region, b->key, b->offset, b->byte_size) : b.status();
    }
    pipeline_->metrics()->SetSharedMemoryRegions(shm_->size());
    if (!s.ok()) return SendError(req, s);
    return Send(req, 200, "{}");
  }
  if (parts[1] != "models" || parts.size() < 3) return not_found();
  if (parts.size() == 3 && parts[2] == "stats") {
    if (!get) return wrong_method("GET");
    std::vector<const OpDef*> defs;
    for (const auto& d : pipeline_->registry().ops()) defs.push_back(d.get());
    return Send(req, 200, StatsJson(*pipeline_->metrics(), defs));
  }
  // /v2/models/{m}[/versions/{v}][/ready|/infer]
  const std::string& model = parts[2];
  std::string version;
  size_t at = 3;
  if (parts.size() >= 5 && parts[3] == "versions") {
    version = parts[4];
    at = 5;
  }
  if (parts.size() > at + 1) return not_found();
  const std::string action = parts.size() == at + 1 ? parts[at] : "";
  if (action == "infer") {
    if (!post) return wrong_method("POST");
    return Infer(req, model, version);
  }
  if (action != "" && action != "ready" && action != "stats") return not_found();
  if (!get) return wrong_method("GET");
  absl::StatusOr<const OpDef*> def = FindModel(pipeline_->registry(), model, version);
  if (!def.ok()) return SendError(req, def.status());
  if (action == "stats") return Send(req, 200, StatsJson(*pipeline_->metrics(), {*def}));
  if (action == "ready") {
    return Send(req, 200, Json([&](JsonOut& w) {
                  w.StartObject();
                  w.Key("name");
                  Str(w, (*def)->spec.name);
                  w.Key("ready");
                  w.Bool(true);
                  w.EndObject();
                }));
  }
  return Send(req, 200, ModelMetadataJson(**def));
}

void HttpServer::Infer(evhttp_request* req, const std::string& model, const std::string& version) {
  (new InferCall(this, req))->Start(model, version);
}

}  // namespace tensorops
