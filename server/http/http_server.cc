#include "server/http/http_server.h"

#include <openssl/ssl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
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

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

using JsonOut = rapidjson::Writer<rapidjson::StringBuffer>;

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

HttpResponse ErrorResponse(const absl::Status& status) {
  return JsonResponse(HttpStatusOf(status), ErrorJson(status.message()));
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

std::string Json(absl::FunctionRef<void(JsonOut&)> fill) {
  rapidjson::StringBuffer buffer;
  JsonOut w(buffer);
  fill(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

void Str(JsonOut& w, absl::string_view s) { w.String(s.data(), s.size()); }

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

}  // namespace

// The server proper; HttpServer is its handle. Thread-safety: the members
// are set before the loops start and read-only after, but for the
// acceptor's (loop 0's thread only).
class HttpServerImpl {
 public:
  HttpServerImpl(CallPipeline* pipeline, ShmRegistry* shm, const HttpServer::Options& options)
      : pipeline(pipeline), shm(shm), options(options) {}

  void Accept();
  void Route(HttpRequest req, net::any_io_executor loop, Reply reply);
  void Infer(HttpRequest req, net::any_io_executor loop, Reply reply, const std::string& model,
             const std::string& version);

  CallPipeline* const pipeline;
  ShmRegistry* const shm;
  const HttpServer::Options options;
  std::unique_ptr<net::ssl::context> tls;  // HTTPS only when set
  struct Loop {
    net::io_context io{1};  // one thread runs it
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops;
  std::optional<tcp::acceptor> acceptor;  // on loops[0]
  std::optional<net::steady_timer> accept_backoff;
  size_t next_loop = 0;
};

namespace {

// A request's header may take this long to arrive once the connection is
// idle (keep-alive), and each read or write of a body this long; a client
// that stalls past it loses the connection.
constexpr auto kIoTimeout = std::chrono::seconds(120);
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
// After refusing a request whose body it did not read, a connection reads
// on (and drops) what comes for at most this long before it closes, so the
// client can finish sending and read the answer (see Connection::Linger).
constexpr auto kLingerTime = std::chrono::seconds(5);
constexpr size_t kLingerBufferBytes = 64 << 10;

// One connection, HTTP (Stream = beast::tcp_stream) or HTTPS
// (beast::ssl_stream<beast::tcp_stream>): reads a request, hands it to the
// router, writes its answer, and reads the next (so pipelined requests are
// answered in order). Lives as long as an operation or a pending answer
// holds it; runs only on its loop's thread.
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(HttpServerImpl* server, Stream stream) : server_(server), stream_(std::move(stream)) {}

  void Start() {
    if constexpr (kTls) {
      Lowest().expires_after(kIoTimeout);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return;  // not TLS, or refused: close unanswered
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(static_cast<uint64_t>(server_->options.max_body_bytes));
    parser_->get().body().CountAgainst(server_->pipeline,
                                       static_cast<uint64_t>(server_->options.max_body_bytes));
    Lowest().expires_after(kIoTimeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return Refuse(ec);
    const auto& header = parser_->get();
    if (parser_->is_done()) return Dispatch();
    if (!parser_->chunked() && parser_->content_length()) {
      // A declared length counts against the in-flight budget before any
      // of it is read (or a 100 Continue asks for it): over the budget the
      // answer is 503 and the body is never taken.
      if (absl::Status s = parser_->get().body().ReserveExact(*parser_->content_length());
          !s.ok()) {
        return RefuseWith(HttpStatusOf(s), std::string(s.message()));
      }
    }
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      // curl sends this before bodies over 1 MiB and waits for it.
      continue_.emplace(http::status::continue_, header.version());
      Lowest().expires_after(kIoTimeout);
      return http::async_write(stream_, *continue_,
                               [self = this->shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return;
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(kIoTimeout);
    auto self = this->shared_from_this();
    if (parser_->chunked() || !parser_->content_length()) {
      // Chunked: Beast decodes it into RequestBody.
      return http::async_read(stream_, buffer_, *parser_, [self](beast::error_code ec, size_t) {
        if (ec) return self->Refuse(ec);
        self->Dispatch();
      });
    }
    // A known length (under the limit: the parser checked it with the
    // header; reserved in OnHeader): what came with the header, then the
    // rest read straight into the body, each read as large as the socket has.
    const uint64_t length = *parser_->content_length();
    BodyBytes& body = parser_->get().body();
    const size_t have = std::min<uint64_t>(buffer_.size(), length);
    // Within the room reserved for `length`: cannot be refused.
    body.Append(beast::buffers_prefix(have, buffer_.data())).IgnoreError();
    buffer_.consume(have);
    if (have == length) return Dispatch();
    net::async_read(stream_, net::buffer(body.end(), length - have),
                    [self](beast::error_code ec, size_t n) {
                      // The client went away or stalled: the connection
                      // ends, and with it the body and its reservation.
                      if (ec) return;
                      self->parser_->get().body().Grow(n);
                      self->Dispatch();
                    });
  }

  // A request that cannot be read: the JSON error its client expects when
  // there is one to give, then close; nothing for a connection that ended.
  void Refuse(beast::error_code ec) {
    int status = 400;
    std::string why;
    if (parser_.has_value() && !parser_->get().body().refusal().ok()) {
      // A chunked body the in-flight budget could not take (503).
      const absl::Status& refusal = parser_->get().body().refusal();
      status = HttpStatusOf(refusal);
      why = std::string(refusal.message());
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
      return;  // end of stream, reset, timeout, TLS truncation: close
    }
    RefuseWith(status, why);
  }

  // Answers `status` with {"error": why} and closes after lingering: the
  // body (if any) is not read, so the client may still be sending it.
  void RefuseWith(int status, const std::string& why) {
    // What was read of the body and its reservation go back now, not when
    // the connection ends.
    parser_.reset();
    version_ = 11;
    keep_alive_ = false;
    head_ = false;
    linger_ = true;
    HttpResponse r = JsonResponse(status, ErrorJson(why));
    r.close = true;
    Send(std::move(r));
  }

  void Dispatch() {
    Lowest().expires_never();  // the call's own deadline governs now
    HttpRequest req;
    keep_alive_ = parser_->get().keep_alive();
    req.header = std::move(parser_->get().base());
    req.body = std::move(parser_->get().body());
    parser_.reset();
    version_ = req.header.version();
    head_ = req.header.method() == http::verb::head;
    auto self = this->shared_from_this();
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
    http::async_write(
        stream_, res,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(beast::error_code ec) {
    const bool keep = !ec && response_->keep_alive();
    response_.reset();         // gives the outputs' buffers back now, not at the next answer
    answer_ticket_.Release();  // and their bytes of the budget
    if (ec) return;
    if (keep) return ReadHeader();
    if constexpr (kTls) {
      Lowest().expires_after(std::chrono::seconds(5));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      if (linger_) {
        // A refused request's body may still be on its way: closing with
        // unread bytes would send a reset, which can destroy the answer
        // before the client reads it. Read on and drop what comes, until
        // the client closes or kLingerTime passes (nginx's lingering_close).
        Lowest().expires_after(kLingerTime);
        linger_buffer_ = std::make_unique<char[]>(kLingerBufferBytes);
        Linger();
      }
    }
  }

  void Linger() {
    Lowest().async_read_some(net::buffer(linger_buffer_.get(), kLingerBufferBytes),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (!ec) self->Linger();  // EOF, an error or the time limit: close
                             });
  }

  HttpServerImpl* const server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<RequestBody>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  std::optional<http::response<ResponseBody>> response_;
  AdmissionTicket answer_ticket_;  // response_'s bytes (HttpResponse::ticket)
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool linger_ = false;  // RefuseWith: read on after the answer before closing
  std::unique_ptr<char[]> linger_buffer_;
};

}  // namespace

void HttpServerImpl::Accept() {
  Loop& loop = *loops[next_loop++ % loops.size()];
  acceptor->async_accept(loop.io, [this, &loop](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, most likely: wait instead of spinning on it.
      Log(LogLevel::kWarning, absl::StrCat("HTTP accept failed: ", ec.message()));
      accept_backoff->expires_after(std::chrono::milliseconds(50));
      accept_backoff->async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    // No Nagle: an answer's last partial segment must not wait for the
    // client's delayed ACK (40 ms a call with binary replies of 64 KiB).
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (tls != nullptr) {
      auto c = std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
          this, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls));
      net::post(loop.io, [c] { c->Start(); });
    } else {
      auto c = std::make_shared<Connection<beast::tcp_stream>>(
          this, beast::tcp_stream(std::move(socket)));
      net::post(loop.io, [c] { c->Start(); });
    }
    Accept();
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
      reply_(JsonResponse(415, ErrorJson(absl::StrCat("Content-Encoding '", *e,
                                                      "' is not supported; send identity"))));
      delete this;
      return;
    }
    call_ =
        std::make_unique<Call>(server_->pipeline, CallMethod::kRest, req_.Header("Authorization"),
                               absl::InfiniteFuture(), [this](const grpc::Status& s) {
                                 status_ = FromGrpcStatus(s);
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

  // Shared-memory regions belong to the caller's Authorization value when
  // tokens are on (as on gRPC, so both doors see the same regions).
  std::string Owner() const {
    if (!server_->options.tokens_required) return "";
    return req_.Header("Authorization").value_or("");
  }

  void Answer() {
    if (!status_.ok()) {
      reply_(ErrorResponse(status_));
    } else {
      HttpResponse r;
      if (binary_.empty()) {
        r.headers.emplace_back("Content-Type", "application/json");
      } else {
        r.headers.emplace_back("Content-Type", "application/octet-stream");
        r.headers.emplace_back("Inference-Header-Content-Length", absl::StrCat(json_.size()));
      }
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
  std::unique_ptr<Call> call_;
};

void HttpServerImpl::Infer(HttpRequest req, net::any_io_executor loop, Reply reply,
                           const std::string& model, const std::string& version) {
  (new InferCall(this, std::move(req), std::move(loop), std::move(reply)))->Start(model, version);
}

HttpServer::HttpServer(std::unique_ptr<HttpServerImpl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(CallPipeline* pipeline,
                                                              ShmRegistry* shm,
                                                              const Options& options) {
  auto impl = std::make_unique<HttpServerImpl>(pipeline, shm, options);
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
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(impl)));
  s->port_ = bound.port();
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
  if (parts.empty() || parts[0] != "v2") return not_found();

  // Open endpoints: health (as grpc.health.v1 and ServerLive/ServerReady).
  if (parts.size() == 3 && parts[1] == "health" && (parts[2] == "live" || parts[2] == "ready")) {
    if (!get) return wrong_method("GET");
    if (parts[2] == "live") return send(200, R"({"live":true})");
    return pipeline->draining() ? send(503, R"({"ready":false})") : send(200, R"({"ready":true})");
  }

  // Everything else: the bearer token and the drain gate.
  const std::optional<std::string> authorization = req.Header("Authorization");
  const std::string auth_value = authorization.value_or("");
  const absl::string_view auth_view = auth_value;
  if (absl::Status gate = pipeline->Gate(authorization.has_value() ? &auth_view : nullptr);
      !gate.ok()) {
    return send_error(gate);
  }

  if (parts.size() == 1) {
    if (!get) return wrong_method("GET");
    return send(200, Json([&](JsonOut& w) {
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
                  if (shm->enabled()) Str(w, "system_shared_memory");
                  w.EndArray();
                  w.EndObject();
                }));
  }
  if (parts[1] == "repository") {
    if (parts.size() == 3 && parts[2] == "index") {
      if (!post) return wrong_method("POST");
      return send(200, Json([&](JsonOut& w) {
                    w.StartArray();
                    for (const auto& def : pipeline->registry().ops()) {
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
    const std::string owner = options.tokens_required ? authorization.value_or("") : "";
    if (verb == "status") {
      if (!get) return wrong_method("GET");
      if (!shm->enabled()) return send(200, "[]");
      absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> regions =
          shm->List(owner, region);
      if (!regions.ok()) return send_error(regions.status());
      return send(200, Json([&](JsonOut& w) {
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
    if (!shm->enabled()) {
      return send(501,
                  ErrorJson("system shared memory is off on this server (--shared_memory=system)"));
    }
    absl::Status s;
    if (verb == "unregister") {
      s = shm->Unregister(owner, region);
    } else {
      if (region.empty()) return not_found();
      absl::StatusOr<ShmRegisterBody> b = ParseRegisterBody(req.body.view());
      s = b.ok() ? shm->Register(owner, region, b->key, b->offset, b->byte_size) : b.status();
    }
    pipeline->metrics()->SetSharedMemoryRegions(shm->size());
    if (!s.ok()) return send_error(s);
    return send(200, "{}");
  }
  if (parts[1] != "models" || parts.size() < 3) return not_found();
  if (parts.size() == 3 && parts[2] == "stats") {
    if (!get) return wrong_method("GET");
    std::vector<const OpDef*> defs;
    for (const auto& d : pipeline->registry().ops()) defs.push_back(d.get());
    return send(200, StatsJson(*pipeline->metrics(), defs));
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
  absl::StatusOr<const OpDef*> def = FindModel(pipeline->registry(), model, version);
  if (!def.ok()) return send_error(def.status());
  if (action == "stats") return send(200, StatsJson(*pipeline->metrics(), {*def}));
  if (action == "ready") {
    return send(200, Json([&](JsonOut& w) {
                  w.StartObject();
                  w.Key("name");
                  Str(w, (*def)->spec.name);
                  w.Key("ready");
                  w.Bool(true);
                  w.EndObject();
                }));
  }
  return send(200, ModelMetadataJson(**def));
}

}  // namespace tensorops
