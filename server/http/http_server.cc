#include "server/http/http_server.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "boost/intrusive/list.hpp"
#include "kernels/status_macros.h"
#include "kernels/tensor.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/core/logging.h"
#include "server/http/json_binding.h"
#include "server/oip/oip_codec.h"
#include "server/oip/oip_service.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

using JsonOut = rapidjson::Writer<rapidjson::StringBuffer>;

// Retry-After of the 503 at the connection cap: the longest-idle connection
// is evicted for a new one, so the cap clears as soon as one goes idle.
constexpr absl::Duration kConnectionCapRetryDelay = absl::Seconds(1);

// Address space for a body of unknown length (chunked): reserved once at
// the body limit with PROT_NONE (no memory, no commit charge) and made
// writable in steps as bytes arrive, so the body grows in place, without a
// copy, and holds no more pages than it has bytes. (A buffer that doubled
// held up to twice the body and copied it at each step: a 274 MiB chunked
// body took the RSS from 19 to 555 MiB.) Move-only; unmapped when destroyed.
class GrowableBuffer {
 public:
  GrowableBuffer() = default;
  GrowableBuffer(GrowableBuffer&& other) noexcept { *this = std::move(other); }
  GrowableBuffer& operator=(GrowableBuffer&& other) noexcept {
    if (this != &other) {
      Unmap();
      base_ = std::exchange(other.base_, nullptr);
      reserved_ = std::exchange(other.reserved_, 0);
      writable_ = std::exchange(other.writable_, 0);
    }
    return *this;
  }
  ~GrowableBuffer() { Unmap(); }

  // Makes the first `n` bytes writable (n <= max_bytes, the same max_bytes
  // on every call). False when the system refuses the address space or the
  // commit.
  bool MakeWritable(uint64_t n, uint64_t max_bytes) {
    if (n <= writable_) return true;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (base_ == nullptr) {
      reserved_ = (max_bytes + page - 1) / page * page;
      void* p =
          mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        reserved_ = 0;
        return false;
      }
      base_ = static_cast<char*>(p);
    }
    const uint64_t to = std::min(reserved_, (n + page - 1) / page * page);
    if (mprotect(base_ + writable_, to - writable_, PROT_READ | PROT_WRITE) != 0) return false;
    writable_ = to;
    return true;
  }
  char* data() const { return base_; }

 private:
  void Unmap() {
    if (base_ != nullptr) munmap(base_, reserved_);
    base_ = nullptr;
  }

  char* base_ = nullptr;
  uint64_t reserved_ = 0;  // address space, PROT_NONE beyond writable_
  uint64_t writable_ = 0;
};

// A request body, contiguous: tensors are used in place from it. Its bytes
// count against the in-flight budget (--max_inflight_bytes) before they are
// taken, as a gRPC message's do: a reservation (CallPipeline::Reserve) that
// the call's admission then takes over (Call::HoldReservation). A body of
// known length is reserved whole before any of it is read, into one buffer
// from BufferCache (through Tensor), whose pages a previous call already
// touched (a fresh allocation's first-touch page faults cost more than
// reading the bytes). A chunked body grows in a GrowableBuffer, reserved a
// step ahead of its bytes.
class BodyBytes {
 public:
  // Every request's body counts against `pipeline`'s budget, up to
  // `max_bytes` (the body limit, which the parser enforces).
  void CountAgainst(CallPipeline* pipeline, uint64_t max_bytes) {
    pipeline_ = pipeline;
    max_bytes_ = max_bytes;
  }
  // A known length: `n` bytes reserved, then room for them. On refusal
  // (RESOURCE_EXHAUSTED naming the budget, UNAVAILABLE while draining)
  // nothing is allocated.
  absl::Status ReserveExact(uint64_t n) {
    RETURN_IF_ERROR(Count(n, absl::StrCat("request body of ", n, " bytes")));
    storage_ = Tensor(DType::kUInt8, {static_cast<int64_t>(n)});
    data_ = storage_.mutable_data_as<char>();
    capacity_ = n;
    exact_ = true;
    return absl::OkStatus();
  }
  // Appends `buffers`: within ReserveExact's room, else (a chunked body)
  // growing the room and its reservation by a step: an eighth of the body,
  // 64 KiB to 8 MiB, so a body holds at most its size plus one step. On
  // refusal nothing is appended and refusal() says why.
  template <class ConstBufferSequence>
  absl::Status Append(const ConstBufferSequence& buffers) {
    const uint64_t n = net::buffer_size(buffers);
    if (size_ + n > capacity_) {
      if (absl::Status s = GrowTo(size_ + n); !s.ok()) {
        refusal_ = s;
        return s;
      }
    }
    net::buffer_copy(net::buffer(end(), n), buffers);
    size_ += n;
    return absl::OkStatus();
  }
  char* end() { return data_ + size_; }
  void Grow(uint64_t n) { size_ += n; }
  uint64_t size() const { return size_; }
  absl::string_view view() const {
    if (size_ == 0) return "";
    return absl::string_view(data_, size_);
  }
  // Why the body could not grow (OK when it could).
  const absl::Status& refusal() const { return refusal_; }
  // The reservation, for the call that uses the body; the body keeps its bytes.
  AdmissionTicket TakeReservation() { return std::move(reservation_); }

 private:
  static constexpr uint64_t kMinStep = 64 << 10;
  static constexpr uint64_t kMaxStep = 8 << 20;

  // Reserves `n` bytes in all; a refusal's message starts with `what`.
  absl::Status Count(uint64_t n, absl::string_view what) {
    if (pipeline_ == nullptr) return absl::OkStatus();
    absl::Status s = pipeline_->Reserve(static_cast<int64_t>(n), &reservation_);
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  absl::Status GrowTo(uint64_t need) {
    if (exact_ || need > max_bytes_) {
      // Past a declared length or the body limit: the parser stops both first.
      return absl::InternalError("request body past its declared length or the body limit");
    }
    const uint64_t step = std::clamp(need / 8, kMinStep, kMaxStep);
    const uint64_t room = std::min(max_bytes_, need + step);
    RETURN_IF_ERROR(Count(room, absl::StrCat("chunked request body at ", need, " bytes")));
    if (!growable_.MakeWritable(room, max_bytes_)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no memory for a request body of ", need, " bytes: ", std::strerror(errno)));
    }
    data_ = growable_.data();
    capacity_ = room;
    return absl::OkStatus();
  }

  CallPipeline* pipeline_ = nullptr;
  uint64_t max_bytes_ = 0;
  AdmissionTicket reservation_;
  Tensor storage_;           // a known length
  GrowableBuffer growable_;  // a chunked body
  char* data_ = nullptr;     // storage_'s or growable_'s
  uint64_t capacity_ = 0;
  uint64_t size_ = 0;
  bool exact_ = false;  // ReserveExact's room: never grows
  absl::Status refusal_;
};

// Beast's Body for requests read through its parser (chunked bodies): the
// chunks' payload appended to BodyBytes, which grows in steps and counts
// them against the budget. The parser enforces the body limit (from a
// chunk's declared size, before its bytes).
struct RequestBody {
  using value_type = BodyBytes;

  class reader {
   public:
    template <bool kIsRequest, class Fields>
    reader(http::header<kIsRequest, Fields>&, value_type& body) : body_(body) {}
    // A known length never comes here (the connection reads such a body
    // itself, reserved before); a chunked body has none.
    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      if (!body_.Append(buffers).ok()) {
        // Connection::Refuse answers with body_.refusal().
        ec = net::error::no_buffer_space;
        return 0;
      }
      ec = {};
      return net::buffer_size(buffers);
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// An answer's body: small JSON (`json`, the endpoints but infer), or an
// infer's JSON text then each binary output, written in one gather write
// straight from where they are (no copy into a send buffer).
struct ResponseBody {
  struct value_type {
    std::string json;
    JsonText infer_json;
    std::vector<Tensor> binary;
  };
  static std::uint64_t size(const value_type& v) {
    uint64_t n = v.json.size() + static_cast<uint64_t>(v.infer_json.size());
    for (const Tensor& t : v.binary) n += static_cast<uint64_t>(t.num_bytes());
    return n;
  }

  class writer {
   public:
    using const_buffers_type = std::vector<net::const_buffer>;
    template <bool kIsRequest, class Fields>
    writer(const http::header<kIsRequest, Fields>&, const value_type& body) : body_(body) {}
    void init(beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      const_buffers_type buffers;
      buffers.reserve(2 + body_.binary.size());
      if (!body_.json.empty()) buffers.emplace_back(body_.json.data(), body_.json.size());
      const absl::string_view infer_json = body_.infer_json.view();
      if (!infer_json.empty()) buffers.emplace_back(infer_json.data(), infer_json.size());
      for (const Tensor& t : body_.binary) {
        if (t.num_bytes() > 0) buffers.emplace_back(t.data(), static_cast<size_t>(t.num_bytes()));
      }
      if (buffers.empty()) return boost::none;
      return std::make_pair(std::move(buffers), false);
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};

// One request as the router sees it, whatever the connection (HTTP or
// HTTPS).
struct HttpRequest {
  http::request_header<> header;
  BodyBytes body;

  std::optional<std::string> Header(absl::string_view name) const {
    auto it = header.find(beast::string_view(name.data(), name.size()));
    if (it == header.end()) return std::nullopt;
    return std::string(it->value());
  }
};

// One answer. Written by the connection's loop.
struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type first
  ResponseBody::value_type body;
  bool close = false;  // close the connection after it
  // An infer's admission ticket, held for the answer's bytes until they are
  // written (Connection::OnWritten), as gRPC holds it until OnDone.
  AdmissionTicket ticket;
};

HttpResponse JsonResponse(int status, std::string json) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body.json = std::move(json);
  return r;
}

// A refusal the server decided with a google.rpc.RetryInfo (admission,
// drain: wire/status_details.h) tells the client when to come back, in
// HTTP's whole seconds (RFC 9110 Retry-After), rounded up.
void AddRetryAfter(std::optional<absl::Duration> delay, HttpResponse* r) {
  if (!delay.has_value()) return;
  r->headers.emplace_back("Retry-After",
                          absl::StrCat(absl::ToInt64Seconds(absl::Ceil(*delay, absl::Seconds(1)))));
}

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse r = JsonResponse(HttpStatusOf(status), ErrorJson(status));
  AddRetryAfter(RetryDelay(status), &r);
  return r;
}

// Called once per request, on the connection's loop thread.
using Reply = std::function<void(HttpResponse)>;

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

// Whether the path's segments are /v2/models/{m}[/versions/{v}]/infer, as
// Route reads them.
bool IsInferPath(const std::vector<std::string>& parts) {
  if (parts.size() < 4 || parts[0] != "v2" || parts[1] != "models") return false;
  const size_t at = parts.size() >= 5 && parts[3] == "versions" ? 5 : 3;
  return parts.size() == at + 1 && parts[at] == "infer";
}

// The HTTP door's CallContext (server/core/call_context.h): the request's
// Authorization header; no deadline (a queued call is dropped only past the
// request's `timeout` parameter) and never cancelled.
class HttpCallContext final : public CallContext {
 public:
  // `header` (the request's, for its trace context; null: none) must
  // outlive this.
  explicit HttpCallContext(std::optional<std::string> authorization,
                           const http::request_header<>* header = nullptr)
      : authorization_(std::move(authorization)), header_(header) {}
  std::optional<absl::string_view> authorization() const override {
    if (!authorization_.has_value()) return std::nullopt;
    return absl::string_view(*authorization_);
  }
  absl::Time deadline() const override { return absl::InfiniteFuture(); }
  bool cancelled() const override { return false; }
  std::optional<absl::string_view> traceparent() const override { return Find("traceparent"); }
  std::optional<absl::string_view> tracestate() const override { return Find("tracestate"); }

 private:
  std::optional<absl::string_view> Find(beast::string_view name) const {
    if (header_ == nullptr) return std::nullopt;
    auto it = header_->find(name);
    if (it == header_->end()) return std::nullopt;
    return absl::string_view(it->value().data(), it->value().size());
  }

  const std::optional<std::string> authorization_;
  const http::request_header<>* const header_;
};

// The bearer token, then the drain gate, for an answer outside a Call.
absl::Status Gate(CallPipeline& pipeline, const std::optional<std::string>& authorization) {
  return pipeline.Gate(HttpCallContext(authorization));
}

std::string Json(absl::FunctionRef<void(JsonOut&)> fill) {
  rapidjson::StringBuffer buffer;
  JsonOut w(buffer);
  fill(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

void Str(JsonOut& w, absl::string_view s) { w.String(s.data(), s.size()); }

// "key": value, for the renderings below.
void Field(JsonOut& w, const char* key, absl::string_view value) {
  w.Key(key);
  Str(w, value);
}
void Field(JsonOut& w, const char* key, uint64_t value) {
  w.Key(key);
  w.Uint64(value);
}
void Field(JsonOut& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& s : values) Str(w, s);
  w.EndArray();
}

// The JSON renderings of OipService's values (api-rest.md "Endpoints").

std::string ServerMetadataJson(const OipServerMetadata& m) {
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", m.name);
    Field(w, "version", m.version);
    Field(w, "extensions", m.extensions);
    w.EndObject();
  });
}

std::string ModelMetadataJson(const OipModelMetadata& m) {
  auto tensors = [](JsonOut& w, const char* key, const std::vector<OipTensorMetadata>& ts) {
    w.Key(key);
    w.StartArray();
    for (const OipTensorMetadata& t : ts) {
      w.StartObject();
      Field(w, "name", t.name);
      Field(w, "datatype", t.datatype);
      w.Key("shape");
      w.StartArray();
      for (int64_t d : t.shape) w.Int64(d);
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
  };
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", m.name);
    Field(w, "versions", m.versions);
    Field(w, "platform", m.platform);
    tensors(w, "inputs", m.inputs);
    tensors(w, "outputs", m.outputs);
    w.EndObject();
  });
}

std::string ModelReadyJson(const OpDef& def) {
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", def.spec.name);
    w.Key("ready");
    w.Bool(true);
    w.EndObject();
  });
}

// {"model_stats": [...]}: every duration of the protocol (compute_input and
// compute_output zero) and an empty batch_stats.
std::string StatsJson(const std::vector<OipModelStats>& stats) {
  auto duration = [](JsonOut& w, const char* key, const OipDuration& d) {
    w.Key(key);
    w.StartObject();
    Field(w, "count", d.count);
    Field(w, "ns", d.ns);
    w.EndObject();
  };
  return Json([&](JsonOut& w) {
    w.StartObject();
    w.Key("model_stats");
    w.StartArray();
    for (const OipModelStats& s : stats) {
      w.StartObject();
      Field(w, "name", s.name);
      Field(w, "version", s.version);
      Field(w, "last_inference", s.last_inference);
      Field(w, "inference_count", s.inference_count);
      Field(w, "execution_count", s.execution_count);
      w.Key("inference_stats");
      w.StartObject();
      duration(w, "success", s.success);
      duration(w, "fail", s.fail);
      duration(w, "queue", s.queue);
      duration(w, "compute_input", OipDuration{});
      duration(w, "compute_infer", s.compute_infer);
      duration(w, "compute_output", OipDuration{});
      w.EndObject();
      Field(w, "batch_stats", std::vector<std::string>{});
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

std::string RepositoryIndexJson(const std::vector<OipModelIndex>& models) {
  return Json([&](JsonOut& w) {
    w.StartArray();
    for (const OipModelIndex& m : models) {
      w.StartObject();
      Field(w, "name", m.name);
      Field(w, "version", m.version);
      Field(w, "state", m.state);
      Field(w, "reason", m.reason);
      w.EndObject();
    }
    w.EndArray();
  });
}

std::string ShmStatusJson(const std::vector<OipShmRegionStatus>& regions) {
  return Json([&](JsonOut& w) {
    w.StartArray();
    for (const OipShmRegionStatus& r : regions) {
      w.StartObject();
      Field(w, "name", r.name);
      Field(w, "key", r.key);
      Field(w, "offset", r.offset);
      Field(w, "byte_size", r.byte_size);
      w.EndObject();
    }
    w.EndArray();
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

// A connection as the door's connection cap sees it (Connection<Stream> is
// one): in the door's idle list while it waits for a request with no byte of
// it read yet, so that a new connection at the cap can close the one idle
// longest instead of being refused. The hook and `evicted` are guarded by
// HttpServerImpl::mu; `executor` is set at construction and read anywhere.
class ConnectionBase : public boost::intrusive::list_base_hook<
                           boost::intrusive::link_mode<boost::intrusive::safe_link>>,
                       public std::enable_shared_from_this<ConnectionBase> {
 public:
  explicit ConnectionBase(net::any_io_executor executor) : executor(std::move(executor)) {}
  virtual ~ConnectionBase() = default;
  // Closes the connection now; on its loop's thread.
  virtual void Evict() = 0;

  const net::any_io_executor executor;  // its loop
  bool evicted = false;                 // taken off the idle list to be closed
};
using IdleList = boost::intrusive::list<ConnectionBase>;

}  // namespace

// The server proper; HttpServer is its handle. Thread-safety: the members
// are set before the loops start and read-only after, but for the
// acceptor's (loop 0's thread only) and the connection table (mu).
class HttpServerImpl {
 public:
  HttpServerImpl(CallPipeline* pipeline, OipService* oip, const HttpServer::Options& options)
      : pipeline(pipeline), oip(oip), shm(oip->shm()), options(options) {}
  ~HttpServerImpl() {
    if (spare_fd >= 0) ::close(spare_fd);
  }

  void Accept();
  void Route(HttpRequest req, net::any_io_executor loop, Reply reply);
  void Infer(HttpRequest req, net::any_io_executor loop, Reply reply, const std::string& model,
             const std::string& version);

  // The connection cap (Options::max_connections), from any loop's thread.
  // What becomes of a connection just accepted: kOpen, counted (and
  // `*evict`, when set, is an idle connection to close to make room); kRefuse,
  // not counted: answer 503 and close; kDrop: close at once.
  enum class Admission { kOpen, kRefuse, kDrop };
  Admission Admit(std::shared_ptr<ConnectionBase>* evict);
  // A connection Admit let in (`counted`: kOpen, else kRefuse) has ended.
  void Closed(ConnectionBase* c, bool counted);
  // A counted connection waits for a request with no byte of it read: the
  // cap may close it to make room. LeaveIdle is false when it already chose
  // to (the connection then does nothing more: Evict closes it).
  void EnterIdle(ConnectionBase* c);
  bool LeaveIdle(ConnectionBase* c);
  void Record(Metrics::HttpClose reason) { pipeline->metrics()->RecordHttpClosed(reason); }

  CallPipeline* const pipeline;
  OipService* const oip;         // the control endpoints' answers
  const ShmRegistry* const shm;  // infer's shared memory
  const HttpServer::Options options;
  std::unique_ptr<net::ssl::context> tls;  // HTTPS only when set

  // std::mutex rather than absl::Mutex so ThreadSanitizer sees it (see
  // kernels/thread_pool.h).
  std::mutex mu;
  int64_t open = 0;      // guarded by mu: counted connections
  int64_t refusing = 0;  // guarded by mu: answering their 503
  IdleList idle;         // guarded by mu: idle longest first

  struct Loop {
    net::io_context io{1};  // one thread runs it
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops;
  std::optional<tcp::acceptor> acceptor;  // on loops[0]
  std::optional<net::steady_timer> accept_backoff;
  size_t next_loop = 0;
  // Out of descriptors (EMFILE), a connection waiting in the backlog could
  // be neither accepted nor refused: this one (/dev/null) is given up to
  // accept and close them (AcceptFailed), then taken again.
  int spare_fd = -1;
  std::chrono::steady_clock::time_point last_accept_warning;

 private:
  void AcceptFailed(const beast::error_code& ec);
};

namespace {

// A body read (only with --http_min_body_rate=0: else the rate governs), a
// write of an answer or a TLS shutdown may stall this long before the
// connection is closed.
constexpr auto kIoTimeout = std::chrono::seconds(120);
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
// After refusing a request whose body it did not read, a connection reads
// on (and drops) what comes for at most this long before it closes, so the
// client can finish sending and read the answer (see Connection::Linger).
constexpr auto kLingerTime = std::chrono::seconds(5);
constexpr size_t kLingerBufferBytes = 64 << 10;
// A connection refused at the cap lingers less: the door is full.
constexpr auto kRefusedLingerTime = std::chrono::seconds(1);
// Refused connections answering their 503 at once (each holds a descriptor
// above the cap); past this many a refused connection is closed unanswered.
constexpr int64_t kMaxRefusing = 32;
// The first read of an idle connection's next request (the header parser
// reads on when the header is longer).
constexpr size_t kFirstReadBytes = 4 << 10;
// A known-length body is read in reads of up to this (asio's transfer_all).
constexpr size_t kBodyReadBytes = 64 << 10;

// One connection, HTTP (Stream = beast::tcp_stream) or HTTPS
// (beast::ssl_stream<beast::tcp_stream>): reads a request, hands it to the
// router, writes its answer, and reads the next (so pipelined requests are
// answered in order). Lives as long as an operation or a pending answer
// holds it (its deadline timer does not); runs only on its loop's thread.
//
// Deadlines (timer_, one at a time): a new connection has
// Options::header_timeout from its accept for its first request's header
// (TLS handshake included); a keep-alive connection waits
// Options::idle_timeout for its next request's first byte, then has
// header_timeout for the rest of its header; a body must keep
// Options::min_body_rate over each Options::body_rate_window. A header or
// body too late gets 408; a connection that sent nothing is closed silently.
template <class Stream>
class Connection final : public ConnectionBase {
 public:
  // `counted`: admitted under the cap (Start), else refused (StartRefused).
  Connection(HttpServerImpl* server, Stream stream, bool counted)
      : ConnectionBase(stream.get_executor()),
        server_(server),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        counted_(counted) {}
  ~Connection() override { server_->Closed(this, counted_); }

  void Start() {
    Arm(server_->options.header_timeout, Metrics::HttpClose::kHeaderTimeout);
    WaitForRequest();
  }

  // Over the cap with none idle: 503 and close (TLS: closed unanswered, an
  // answer would need a handshake first).
  void StartRefused() {
    if constexpr (!kTls) {
      linger_time_ = kRefusedLingerTime;
      RefuseWith(503,
                 absl::StrCat("the HTTP/REST port has its ", server_->options.max_connections,
                              " connections open and none idle (--http_max_connections); "
                              "retry later"),
                 kConnectionCapRetryDelay);
    }
  }

  void Evict() override {
    beast::error_code ignored;
    Lowest().socket().close(ignored);  // pending operations end: the connection goes
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // Sets the one deadline, replacing the previous one (whose handler, if
  // already queued, sees a newer generation and does nothing).
  void Arm(absl::Duration after, Metrics::HttpClose reason) {
    const uint64_t generation = ++timer_generation_;
    deadline_ = reason;
    timer_.expires_after(absl::ToChronoNanoseconds(after));
    timer_.async_wait([weak = std::weak_ptr<Connection>(Self()), generation](beast::error_code ec) {
      std::shared_ptr<Connection> self = weak.lock();
      if (ec || self == nullptr || generation != self->timer_generation_) return;
      self->OnDeadline();
    });
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void OnDeadline() {
    if (deadline_ == Metrics::HttpClose::kBodyRate) return CheckBodyRate();
    TimeOut(deadline_);
  }
  // Ends the read in progress (idle wait, handshake, header or body): the
  // pending operation is cancelled, and any read after it sees the end of
  // the stream (a composed read whose next step was already queued, when
  // the deadline came, cannot go on); its handler then answers 408 (writing
  // still works) or closes.
  void TimeOut(Metrics::HttpClose reason) {
    timed_out_ = reason;
    beast::error_code ignored;
    Lowest().socket().cancel(ignored);
    Lowest().socket().shutdown(tcp::socket::shutdown_receive, ignored);
  }

  // Waits, idle, for a request's first byte: at the cap, a new connection
  // may close this one meanwhile. A TLS connection waits for its handshake's
  // first byte, then (handshake done) again for its request's.
  void WaitForRequest() {
    Lowest().expires_never();  // timer_ governs reads until the body
    server_->EnterIdle(this);
    if constexpr (kTls) {
      if (!handshaken_) {
        return Lowest().socket().async_wait(
            tcp::socket::wait_read,
            [self = Self()](beast::error_code ec) { self->OnFirstByte(ec, 0); });
      }
    }
    stream_.async_read_some(
        buffer_.prepare(kFirstReadBytes),
        [self = Self()](beast::error_code ec, size_t n) { self->OnFirstByte(ec, n); });
  }

  void OnFirstByte(beast::error_code ec, size_t n) {
    if (!server_->LeaveIdle(this)) return;  // closed to make room
    buffer_.commit(n);
    if (ec) {
      // Silent until a deadline (the header's for a new connection, the
      // idle one's for a keep-alive one): closed without an answer.
      if (timed_out_.has_value()) server_->Record(*timed_out_);
      return;  // or the client closed, or reset
    }
    if (deadline_ == Metrics::HttpClose::kIdleTimeout) {
      // A keep-alive connection's next request: its header from now.
      Arm(server_->options.header_timeout, Metrics::HttpClose::kHeaderTimeout);
    }
    if constexpr (kTls) {
      if (!handshaken_) {
        return stream_.async_handshake(net::ssl::stream_base::server,
                                       [self = Self()](beast::error_code ec) {
                                         if (ec) {
                                           // Not TLS, refused, or too late:
                                           // closed unanswered.
                                           if (self->timed_out_.has_value()) {
                                             self->server_->Record(*self->timed_out_);
                                           }
                                           return;
                                         }
                                         self->handshaken_ = true;
                                         self->WaitForRequest();
                                       });
      }
    }
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(static_cast<uint64_t>(server_->options.max_body_bytes));
    parser_->get().body().CountAgainst(server_->pipeline,
                                       static_cast<uint64_t>(server_->options.max_body_bytes));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = Self()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return Refuse(ec);
    Disarm();  // the header is in
    const auto& header = parser_->get();
    if (parser_->is_done()) return Dispatch();
    if (!parser_->chunked() && parser_->content_length()) {
      // A declared length counts against the in-flight budget before any
      // of it is read (or a 100 Continue asks for it): over the budget the
      // answer is 503 and the body is never taken.
      if (absl::Status s = parser_->get().body().ReserveExact(*parser_->content_length());
          !s.ok()) {
        return RefuseWith(HttpStatusOf(s), std::string(s.message()), RetryDelay(s));
      }
    }
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      // curl sends this before bodies over 1 MiB and waits for it.
      continue_.emplace(http::status::continue_, header.version());
      Lowest().expires_after(kIoTimeout);
      return http::async_write(stream_, *continue_, [self = Self()](beast::error_code ec, size_t) {
        if (ec) return;
        self->ReadBody();
      });
    }
    ReadBody();
  }

  void ReadBody() {
    if (server_->options.min_body_rate > 0) {
      Lowest().expires_never();
      body_progress_ = 0;
      window_start_ = 0;
      Arm(server_->options.body_rate_window, Metrics::HttpClose::kBodyRate);
    } else {
      Lowest().expires_after(kIoTimeout);
    }
    auto self = Self();
    if (parser_->chunked() || !parser_->content_length()) {
      // Chunked: Beast decodes it into RequestBody.
      chunked_ = true;
      return http::async_read(stream_, buffer_, *parser_, [self](beast::error_code ec, size_t) {
        if (ec) return self->Refuse(ec);
        self->Dispatch();
      });
    }
    // A known length (under the limit: the parser checked it with the
    // header; reserved in OnHeader): what came with the header, then the
    // rest read straight into the body.
    chunked_ = false;
    const uint64_t length = *parser_->content_length();
    BodyBytes& body = parser_->get().body();
    const size_t have = std::min<uint64_t>(buffer_.size(), length);
    // Within the room reserved for `length`: cannot be refused.
    body.Append(beast::buffers_prefix(have, buffer_.data())).IgnoreError();
    buffer_.consume(have);
    if (have == length) return Dispatch();
    net::async_read(
        stream_, net::buffer(body.end(), length - have),
        [this](const beast::error_code& ec, size_t n) -> size_t {
          body_progress_ = n;  // for the rate check
          return ec ? 0 : kBodyReadBytes;
        },
        [self](beast::error_code ec, size_t n) {
          // Too slow: 408; the client went away or stalled: the connection
          // ends, and with it the body and its reservation.
          if (ec) return self->timed_out_.has_value() ? self->Refuse(ec) : void();
          self->parser_->get().body().Grow(n);
          self->Dispatch();
        });
  }

  // Bytes of the body received so far (chunked: its payload).
  uint64_t BodyProgress() const { return chunked_ ? parser_->get().body().size() : body_progress_; }

  // Every body_rate_window: the window's bytes must reach the rate, unless
  // bytes wait unread in the socket (then this loop is the one behind, not
  // the client).
  void CheckBodyRate() {
    const HttpServer::Options& o = server_->options;
    const uint64_t progress = BodyProgress();
    const auto need = static_cast<uint64_t>(static_cast<double>(o.min_body_rate) *
                                            absl::ToDoubleSeconds(o.body_rate_window));
    beast::error_code ec;
    if (progress - window_start_ < need && Lowest().socket().available(ec) == 0) {
      return TimeOut(Metrics::HttpClose::kBodyRate);
    }
    window_start_ = progress;
    Arm(o.body_rate_window, Metrics::HttpClose::kBodyRate);
  }

  // A request that cannot be read: the JSON error its client expects when
  // there is one to give, then close; nothing for a connection that ended.
  void Refuse(beast::error_code ec) {
    int status = 400;
    std::string why;
    std::optional<absl::Duration> retry;
    if (timed_out_.has_value()) {
      server_->Record(*timed_out_);
      status = 408;
      const HttpServer::Options& o = server_->options;
      if (*timed_out_ == Metrics::HttpClose::kBodyRate) {
        why = absl::StrCat("the request body came slower than ", o.min_body_rate, " bytes/s over ",
                           absl::FormatDuration(o.body_rate_window), " (--http_min_body_rate)");
      } else {
        why = absl::StrCat("the request header was not complete within ",
                           absl::FormatDuration(o.header_timeout), " (--http_header_timeout)");
      }
    } else if (parser_.has_value() && !parser_->get().body().refusal().ok()) {
      // A chunked body the in-flight budget could not take (503).
      const absl::Status& refusal = parser_->get().body().refusal();
      status = HttpStatusOf(refusal);
      why = std::string(refusal.message());
      retry = RetryDelay(refusal);
    } else if (ec == http::error::body_limit) {
      status = 413;
      why = absl::StrCat("the request body is over the limit of ", server_->options.max_body_bytes,
                         " bytes (--max_message_bytes)");
    } else if (ec == http::error::header_limit) {
      status = 431;
      why = absl::StrCat("the request header is over the limit of ", kMaxHeaderBytes, " bytes");
    } else if (ec.category() == beast::error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message &&
               ec != http::error::short_read) {
      why = absl::StrCat("malformed HTTP request: ", ec.message());
    } else {
      return;  // end of stream, reset, write timeout, TLS truncation: close
    }
    RefuseWith(status, why, retry);
  }

  // Answers `status` with {"error": why} (and Retry-After when `retry` says
  // when to come back) and closes after lingering: the body (if any) is not
  // read, so the client may still be sending it.
  void RefuseWith(int status, const std::string& why,
                  std::optional<absl::Duration> retry = std::nullopt) {
    Disarm();
    // What was read of the body and its reservation go back now, not when
    // the connection ends.
    parser_.reset();
    version_ = 11;
    keep_alive_ = false;
    head_ = false;
    linger_ = true;
    HttpResponse r = JsonResponse(status, ErrorJson(why));
    AddRetryAfter(retry, &r);
    r.close = true;
    Send(std::move(r));
  }

  void Dispatch() {
    Disarm();
    Lowest().expires_never();  // the call's own deadline governs now
    HttpRequest req;
    keep_alive_ = parser_->get().keep_alive();
    req.header = std::move(parser_->get().base());
    req.body = std::move(parser_->get().body());
    parser_.reset();
    version_ = req.header.version();
    head_ = req.header.method() == http::verb::head;
    auto self = Self();
    server_->Route(std::move(req), stream_.get_executor(),
                   [self](HttpResponse r) { self->Send(std::move(r)); });
  }

  void Send(HttpResponse r) {
    response_.emplace();
    http::response<ResponseBody>& res = *response_;
    res.version(version_);
    res.result(static_cast<unsigned>(r.status));
    for (auto& [name, value] : r.headers) res.insert(name, value);
    res.keep_alive(keep_alive_ && !r.close);
    res.body() = std::move(r.body);
    answer_ticket_ = std::move(r.ticket);
    res.prepare_payload();
    if (head_) res.body() = {};  // the length of a GET, no body
    Lowest().expires_after(kIoTimeout);
    http::async_write(stream_, res,
                      [self = Self()](beast::error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(beast::error_code ec) {
    const bool keep = !ec && response_->keep_alive();
    response_.reset();         // gives the outputs' buffers back now, not at the next answer
    answer_ticket_.Release();  // and their bytes of the budget
    if (ec) return;
    if (keep) {
      if (buffer_.size() > 0) {
        // Pipelined: the next request has begun.
        Arm(server_->options.header_timeout, Metrics::HttpClose::kHeaderTimeout);
        return ReadHeader();
      }
      Arm(server_->options.idle_timeout, Metrics::HttpClose::kIdleTimeout);
      return WaitForRequest();
    }
    if constexpr (kTls) {
      // Closing: the cap may close it sooner to make room.
      if (counted_) server_->EnterIdle(this);
      Lowest().expires_after(std::chrono::seconds(5));
      stream_.async_shutdown([self = Self()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      if (linger_) {
        // A refused request's body may still be on its way: closing with
        // unread bytes would send a reset, which can destroy the answer
        // before the client reads it. Read on and drop what comes, until
        // the client closes or the linger time passes (nginx's
        // lingering_close); the cap may close it sooner to make room.
        if (counted_) server_->EnterIdle(this);
        Lowest().expires_after(linger_time_);
        linger_buffer_ = std::make_unique<char[]>(kLingerBufferBytes);
        Linger();
      }
    }
  }

  void Linger() {
    Lowest().async_read_some(net::buffer(linger_buffer_.get(), kLingerBufferBytes),
                             [self = Self()](beast::error_code ec, size_t) {
                               if (!ec) self->Linger();  // EOF, an error or the time limit: close
                             });
  }

  HttpServerImpl* const server_;
  Stream stream_;
  net::steady_timer timer_;
  const bool counted_;
  uint64_t timer_generation_ = 0;
  Metrics::HttpClose deadline_ = Metrics::HttpClose::kHeaderTimeout;  // what timer_ is for
  std::optional<Metrics::HttpClose> timed_out_;  // the deadline that ended a read
  bool handshaken_ = false;                      // TLS
  bool chunked_ = false;                         // the body being read
  uint64_t body_progress_ = 0;                   // a known length's bytes read after the header's
  uint64_t window_start_ = 0;                    // BodyProgress() when the rate window began
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<RequestBody>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  std::optional<http::response<ResponseBody>> response_;
  AdmissionTicket answer_ticket_;  // response_'s bytes (HttpResponse::ticket)
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool linger_ = false;  // RefuseWith: read on after the answer before closing
  std::chrono::steady_clock::duration linger_time_ = kLingerTime;
  std::unique_ptr<char[]> linger_buffer_;
};

}  // namespace

HttpServerImpl::Admission HttpServerImpl::Admit(std::shared_ptr<ConnectionBase>* evict) {
  std::lock_guard<std::mutex> lock(mu);
  const int64_t cap = options.max_connections;
  if (cap > 0 && open >= cap) {
    if (idle.empty()) {
      Record(Metrics::HttpClose::kCapRefused);
      if (refusing >= kMaxRefusing) return Admission::kDrop;
      ++refusing;
      return Admission::kRefuse;
    }
    ConnectionBase& oldest = idle.front();
    idle.pop_front();
    oldest.evicted = true;
    // Null when it is ending already: its slot is about to be free anyway.
    *evict = oldest.weak_from_this().lock();
    Record(Metrics::HttpClose::kCapIdle);
  }
  ++open;
  pipeline->metrics()->SetHttpConnections(open);
  return Admission::kOpen;
}

void HttpServerImpl::Closed(ConnectionBase* c, bool counted) {
  std::lock_guard<std::mutex> lock(mu);
  if (c->is_linked()) idle.erase(idle.iterator_to(*c));
  if (!counted) {
    --refusing;
    return;
  }
  --open;
  pipeline->metrics()->SetHttpConnections(open);
}

void HttpServerImpl::EnterIdle(ConnectionBase* c) {
  if (options.max_connections <= 0) return;  // nothing to make room for
  std::lock_guard<std::mutex> lock(mu);
  if (!c->evicted && !c->is_linked()) idle.push_back(*c);
}

bool HttpServerImpl::LeaveIdle(ConnectionBase* c) {
  if (options.max_connections <= 0) return true;
  std::lock_guard<std::mutex> lock(mu);
  if (c->evicted) return false;
  if (c->is_linked()) idle.erase(idle.iterator_to(*c));
  return true;
}

void HttpServerImpl::Accept() {
  Loop& loop = *loops[next_loop++ % loops.size()];
  acceptor->async_accept(loop.io, [this, &loop](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) return AcceptFailed(ec);
    std::shared_ptr<ConnectionBase> evict;
    const Admission admission = Admit(&evict);
    if (evict != nullptr) net::post(evict->executor, [evict] { evict->Evict(); });
    if (admission == Admission::kDrop) return Accept();  // `socket` closes
    // No Nagle: an answer's last partial segment must not wait for the
    // client's delayed ACK (40 ms a call with binary replies of 64 KiB).
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const bool counted = admission == Admission::kOpen;
    auto start = [counted](auto c) {
      return [c, counted] { counted ? c->Start() : c->StartRefused(); };
    };
    if (tls != nullptr) {
      net::post(
          loop.io,
          start(std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
              this,
              beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
              counted)));
    } else {
      net::post(loop.io, start(std::make_shared<Connection<beast::tcp_stream>>(
                             this, beast::tcp_stream(std::move(socket)), counted)));
    }
    Accept();
  });
}

void HttpServerImpl::AcceptFailed(const beast::error_code& ec) {
  int64_t shed = 0;
  if (ec == net::error::no_descriptors ||
      ec == boost::system::errc::too_many_files_open_in_system) {
    // Out of descriptors: the backlog's connections could be neither served
    // nor refused and would wait there unanswered (libev's and libuv's
    // remedy): give up the spare descriptor, accept each waiting connection
    // and close it at once, then take the spare back.
    if (spare_fd >= 0) ::close(spare_fd);
    for (; shed < 1024; ++shed) {
      const int fd =
          ::accept4(acceptor->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      Record(Metrics::HttpClose::kNoDescriptors);  // before the close: the peer may look at once
      ::close(fd);
    }
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  // One line per 10 s at most: a flood would otherwise write one per retry.
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_warning >= std::chrono::seconds(10)) {
    last_accept_warning = now;
    Log(LogLevel::kWarning,
        absl::StrCat(
            "HTTP accept failed: ", ec.message(),
            shed > 0 ? absl::StrCat("; ", shed, " waiting connections closed unanswered") : "",
            "; retrying (further failures in the next 10 s not logged)"));
  }
  // Wait instead of spinning on it; the door never stops accepting.
  accept_backoff->expires_after(std::chrono::milliseconds(50));
  accept_backoff->async_wait([this](beast::error_code e) {
    if (!e) Accept();
  });
}

// One infer, from its request to its answer. Owns itself: deleted in
// Answer, on the connection's loop, once the answer is handed to the
// connection, with the admission ticket (shrunk to the answer's bytes),
// which the connection gives back once the answer is written, as a gRPC
// reactor's OnDone does.
class InferCall {
 public:
  InferCall(HttpServerImpl* server, HttpRequest req, net::any_io_executor loop, Reply reply)
      : server_(server), req_(std::move(req)), loop_(std::move(loop)), reply_(std::move(reply)) {}

  void Start(const std::string& model, const std::string& version) {
    const absl::string_view body = req_.body.view();
    std::optional<int64_t> header_length;
    absl::Status header_status;
    if (std::optional<std::string> h = req_.Header("Inference-Header-Content-Length")) {
      int64_t l = 0;
      if (!absl::SimpleAtoi(*h, &l)) {
        header_status =
            absl::InvalidArgumentError("Inference-Header-Content-Length must be a decimal integer");
      }
      header_length = l;
    }
    if (std::optional<std::string> e = req_.Header("Content-Encoding");
        e.has_value() && *e != "identity") {
      // Answered without a Call (not counted), after the gate as before.
      absl::Status gate = Gate(*server_->pipeline, req_.Header("Authorization"));
      reply_(!gate.ok()
                 ? ErrorResponse(gate)
                 : JsonResponse(415, ErrorJson(absl::StrCat("Content-Encoding '", *e,
                                                            "' is not supported; send identity"))));
      delete this;
      return;
    }
    call_context_.emplace(req_.Header("Authorization"), &req_.header);
    call_ = std::make_unique<Call>(server_->pipeline, CallMethod::kRest, &*call_context_,
                                   [this](const absl::Status& s) {
                                     status_ = s;
                                     // Always through the loop's queue: this may run
                                     // inside RunUnary, which still uses the call.
                                     net::post(loop_, [this] { Answer(); });
                                   });
    // The body was counted as it arrived: its reservation becomes the
    // call's admission ticket, grown to the call's whole budget.
    call_->HoldReservation(req_.body.TakeReservation());
    call_->RunUnary(
        model, static_cast<int64_t>(body.size()),
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          // The path's model first: an unknown one is 404 whatever the body.
          RETURN_IF_ERROR(FindModel(server_->pipeline->registry(), model, version).status());
          RETURN_IF_ERROR(header_status);
          ASSIGN_OR_RETURN(parsed_, JsonInferRequest::Parse(body, header_length, model, version,
                                                            server_->pipeline->limits()));
          ASSIGN_OR_RETURN(std::unique_ptr<PreparedInfer> prepared,
                           PreparedInfer::Make(server_->pipeline->registry(), parsed_->request(),
                                               server_->pipeline->limits(), server_->shm, Owner()));
          return std::make_unique<Prepared>(this, std::move(prepared));
        },
        [this] {
          int64_t n = static_cast<int64_t>(json_.size());
          for (const Tensor& b : binary_) n += b.num_bytes();
          return n;
        });
  }

 private:
  // Runs the kernel into the response and encodes it, on the thread that
  // runs the call.
  class Prepared final : public PreparedCall {
   public:
    Prepared(InferCall* call, std::unique_ptr<PreparedInfer> p)
        : call_(call), prepared_(std::move(p)) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    int64_t scratch_bytes() const override { return prepared_->scratch_bytes(); }
    absl::Span<const OpDef* const> chain() const override { return prepared_->chain(); }
    absl::Duration timeout() const override { return prepared_->timeout(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      RETURN_IF_ERROR(prepared_->Run(&call_->response_, pool, min_parallel_bytes));
      return call_->response_.Encode(*call_->parsed_, &call_->json_, &call_->binary_);
    }

   private:
    InferCall* const call_;
    std::unique_ptr<PreparedInfer> prepared_;
  };

  // The call's own traceparent and its stages (Server-Timing), when the
  // pipeline sends them (--trace_headers).
  void AddTraceHeaders(HttpResponse* r) const {
    if (!call_->trace_headers()) return;
    r->headers.emplace_back("traceparent", std::string(call_->trace().traceparent()));
    r->headers.emplace_back("Server-Timing", RenderServerTiming(call_->server_timing()));
  }

  // Shared-memory regions belong to the caller's Authorization value when
  // tokens are on (as on gRPC, so both doors see the same regions).
  std::string Owner() const { return server_->oip->ShmOwner(req_.Header("Authorization")); }

  void Answer() {
    if (!status_.ok()) {
      HttpResponse r = ErrorResponse(status_);
      AddTraceHeaders(&r);
      reply_(std::move(r));
    } else {
      HttpResponse r;
      if (binary_.empty()) {
        r.headers.emplace_back("Content-Type", "application/json");
      } else {
        r.headers.emplace_back("Content-Type", "application/octet-stream");
        r.headers.emplace_back("Inference-Header-Content-Length", absl::StrCat(json_.size()));
      }
      AddTraceHeaders(&r);
      r.body.infer_json = std::move(json_);
      r.body.binary = std::move(binary_);
      // The request's bytes go with this InferCall; the answer's stay
      // counted until the connection has written them.
      r.ticket = call_->TakeTicket();
      AdmissionController::Limit unused;
      r.ticket.Resize(static_cast<int64_t>(ResponseBody::size(r.body)), &unused).IgnoreError();
      reply_(std::move(r));
    }
    delete this;  // ~Call gives an error's admission ticket back
  }

  HttpServerImpl* const server_;
  HttpRequest req_;
  net::any_io_executor loop_;  // the connection's loop
  Reply reply_;
  std::unique_ptr<JsonInferRequest> parsed_;
  JsonInferResponse response_;
  JsonText json_;
  std::vector<Tensor> binary_;
  absl::Status status_;
  std::optional<HttpCallContext> call_context_;  // declared before call_: outlives it
  std::unique_ptr<Call> call_;
};

void HttpServerImpl::Infer(HttpRequest req, net::any_io_executor loop, Reply reply,
                           const std::string& model, const std::string& version) {
  (new InferCall(this, std::move(req), std::move(loop), std::move(reply)))->Start(model, version);
}

HttpServer::HttpServer(std::unique_ptr<HttpServerImpl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(CallPipeline* pipeline,
                                                              OipService* oip,
                                                              const Options& options) {
  auto impl = std::make_unique<HttpServerImpl>(pipeline, oip, options);
  if (options.tls != nullptr) {
    // Asio's context takes a reference of its own on the SSL_CTX.
    SSL_CTX_up_ref(options.tls.get());
    impl->tls = std::make_unique<net::ssl::context>(options.tls.get());
  }
  int loops = options.loops;
  if (loops <= 0) {
    loops = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxDefaultLoops);
  }
  for (int i = 0; i < loops; ++i) impl->loops.push_back(std::make_unique<HttpServerImpl::Loop>());
  net::io_context& io0 = impl->loops[0]->io;
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  tcp::endpoint endpoint;
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<uint16_t>(options.port));
  } else {
    // A host name (localhost): its first address.
    tcp::resolver resolver(io0);
    auto found = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http_host '", options.host, "' does not resolve: ", ec.message()));
    }
    endpoint = found.begin()->endpoint();
  }
  impl->acceptor.emplace(io0);
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options.host, ":",
                                               options.port, ": ", ec.message()));
  }
  const tcp::endpoint bound = impl->acceptor->local_endpoint(ec);
  if (ec) return absl::InternalError(absl::StrCat("HTTP socket: ", ec.message()));
  impl->accept_backoff.emplace(io0);
  impl->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(impl)));
  s->port_ = bound.port();
  s->max_connections_ = options.max_connections;
  s->impl_->Accept();
  for (auto& loop : s->impl_->loops) {
    loop->work.emplace(loop->io.get_executor());
    loop->thread = std::thread([io = &loop->io] { io->run(); });
  }
  return s;
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& loop : impl_->loops) loop->io.stop();
  for (auto& loop : impl_->loops) {
    if (loop->thread.joinable()) loop->thread.join();
  }
  // No loop runs now: the acceptor and the connections (owned by the
  // handlers still queued) go with the io_contexts.
  impl_->accept_backoff.reset();
  impl_->acceptor.reset();
}

HttpServer::~HttpServer() {
  Stop();
  // Connections first (their sockets belong to the loops' io_contexts).
  for (auto& loop : impl_->loops) loop->work.reset();
  impl_->loops.clear();
}

void HttpServerImpl::Route(HttpRequest req, net::any_io_executor loop, Reply reply) {
  const http::verb method = req.header.method();
  const beast::string_view target = req.header.target();
  const std::string path(TargetPath(absl::string_view(target.data(), target.size())));
  // Segments percent-decoded after the split (Triton's clients quote model
  // and region names; an encoded '/' stays inside its segment).
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (std::string& part : parts) {
    if (part.find('%') != std::string::npos) part = PercentDecode(part);
  }
  auto send = [&](int code, std::string json) { reply(JsonResponse(code, std::move(json))); };
  auto send_error = [&](const absl::Status& status) { reply(ErrorResponse(status)); };
  const bool get = method == http::verb::get || method == http::verb::head;
  const bool post = method == http::verb::post;
  auto wrong_method = [&](const char* allowed) {
    HttpResponse r = JsonResponse(405, ErrorJson(absl::StrCat(path, " takes ", allowed)));
    r.headers.emplace_back("Allow", allowed);
    reply(std::move(r));
  };
  auto not_found = [&] { send(404, ErrorJson(absl::StrCat("no endpoint ", path.substr(0, 200)))); };
  // An OipService answer: its error, or 200 and its value in JSON.
  auto send_value = [&](const auto& value, auto to_json) {
    if (!value.ok()) return send_error(value.status());
    send(200, to_json(*value));
  };
  if (parts.empty() || parts[0] != "v2") return not_found();

  // Open endpoints: health (as grpc.health.v1 and ServerLive/ServerReady).
  if (parts.size() == 3 && parts[1] == "health" && (parts[2] == "live" || parts[2] == "ready")) {
    if (!get) return wrong_method("GET");
    if (parts[2] == "live") return send(200, R"({"live":true})");
    // Not ready is 503 here (probes read the status); gRPC's ServerReady answers OK, false.
    return oip->ServerReady() ? send(200, R"({"ready":true})") : send(503, R"({"ready":false})");
  }

  // Everything else: the bearer token and the drain gate. An infer's is its
  // Call's (Call::Open), once, so that a refused infer is counted in the
  // metrics as a refused ModelInfer is.
  const std::optional<std::string> authorization = req.Header("Authorization");
  if (!(post && IsInferPath(parts))) {
    if (absl::Status gate = Gate(*pipeline, authorization); !gate.ok()) return send_error(gate);
  }

  if (parts.size() == 1) {
    if (!get) return wrong_method("GET");
    return send(200, ServerMetadataJson(oip->ServerMetadata(OipDoor::kRest)));
  }
  if (parts[1] == "repository") {
    if (parts.size() == 3 && parts[2] == "index") {
      if (!post) return wrong_method("POST");
      // The body ({"ready": bool}) is not read: every model is ready.
      return send(200, RepositoryIndexJson(oip->RepositoryIndex(/*ready_only=*/false)));
    }
    if (parts.size() == 5 && parts[2] == "models" && (parts[4] == "load" || parts[4] == "unload")) {
      if (!post) return wrong_method("POST");
      return send(501, ErrorJson(absl::StrCat("model '", parts[3],
                                              "': ops are built in and always loaded; ", parts[4],
                                              " is not supported")));
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
    const std::string owner = oip->ShmOwner(authorization);
    // Off, REST lists nothing and refuses changes with 501 (as Triton);
    // gRPC answers each RPC UNAVAILABLE (ShmRegistry's own message).
    if (verb == "status") {
      if (!get) return wrong_method("GET");
      if (!oip->shm_enabled()) return send(200, "[]");
      return send_value(oip->SystemSharedMemoryStatus(owner, region), ShmStatusJson);
    }
    if (verb != "register" && verb != "unregister") return not_found();
    if (!post) return wrong_method("POST");
    if (!oip->shm_enabled()) {
      return send(501,
                  ErrorJson("system shared memory is off on this server (--shared_memory=system)"));
    }
    absl::Status s;
    if (verb == "unregister") {
      s = oip->SystemSharedMemoryUnregister(owner, region);
    } else {
      if (region.empty()) return not_found();
      absl::StatusOr<ShmRegisterBody> b = ParseRegisterBody(req.body.view());
      s = b.ok() ? oip->SystemSharedMemoryRegister(owner, region, b->key, b->offset, b->byte_size)
                 : b.status();
    }
    if (!s.ok()) return send_error(s);
    return send(200, "{}");
  }
  if (parts[1] != "models" || parts.size() < 3) return not_found();
  if (parts.size() == 3 && parts[2] == "stats") {
    if (!get) return wrong_method("GET");
    return send_value(oip->ModelStatistics("", ""), StatsJson);
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
    return Infer(std::move(req), std::move(loop), std::move(reply), model, version);
  }
  if (action != "" && action != "ready" && action != "stats") return not_found();
  if (!get) return wrong_method("GET");
  if (action == "stats") return send_value(oip->ModelStatistics(model, version), StatsJson);
  if (action == "ready") {
    return send_value(oip->Model(model, version),
                      [](const OpDef* def) { return ModelReadyJson(*def); });
  }
  return send_value(oip->ModelMetadata(model, version), ModelMetadataJson);
}

}  // namespace tensorops
