#include "server/http/connection.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "wire/status_details.h"

namespace tensorops {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Retry-After of the 503 at the connection cap: the longest-idle connection
// is evicted for a new one, so the cap clears as soon as one goes idle.
constexpr absl::Duration kConnectionCapRetryDelay = absl::Seconds(1);
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
// The first read of an idle connection's next request (the header parser
// reads on when the header is longer).
constexpr size_t kFirstReadBytes = 4 << 10;
// A known-length body is read in reads of up to this (asio's transfer_all).
constexpr size_t kBodyReadBytes = 64 << 10;

// Appends `buffers` to `body` (within its room, else growing it); on
// refusal nothing is appended and body.refusal() says why.
template <class ConstBufferSequence>
absl::Status AppendTo(BodyBytes& body, const ConstBufferSequence& buffers) {
  const uint64_t n = net::buffer_size(buffers);
  if (absl::Status s = body.MakeRoom(n); !s.ok()) return s;
  net::buffer_copy(net::buffer(body.end(), n), buffers);
  body.Grow(n);
  return absl::OkStatus();
}

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
      if (!AppendTo(body_, buffers).ok()) {
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

// Beast's Body for answers (HttpBody): the text, then each part, in one
// gather write straight from where they are.
struct ResponseBody {
  using value_type = HttpBody;
  static std::uint64_t size(const value_type& v) { return v.size(); }

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
      buffers.reserve(1 + body_.parts.size());
      if (!body_.text.empty()) buffers.emplace_back(body_.text.data(), body_.text.size());
      for (absl::string_view part : body_.parts) {
        if (!part.empty()) buffers.emplace_back(part.data(), part.size());
      }
      if (buffers.empty()) return boost::none;
      return std::make_pair(std::move(buffers), false);
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};

HttpMethod MethodOf(http::verb verb) {
  switch (verb) {
    case http::verb::get:
      return HttpMethod::kGet;
    case http::verb::head:
      return HttpMethod::kHead;
    case http::verb::post:
      return HttpMethod::kPost;
    default:
      return HttpMethod::kOther;
  }
}

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
  Connection(const ConnectionEnv* env, Stream stream, bool counted)
      : env_(env),
        options_(*env->options),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        counted_(counted) {}
  ~Connection() override { env_->table->Closed(this, counted_); }

  void Start() {
    Arm(options_.header_timeout, HttpClose::kHeaderTimeout);
    WaitForRequest();
  }

  // Over the cap with none idle: 503 and close (TLS: closed unanswered, an
  // answer would need a handshake first).
  void StartRefused() {
    if constexpr (!kTls) {
      linger_time_ = kRefusedLingerTime;
      RefuseWith(503,
                 absl::StrCat("the HTTP/REST port has its ", options_.max_connections,
                              " connections open and none idle (--http_max_connections); "
                              "retry later"),
                 kConnectionCapRetryDelay);
    }
  }

  // Its loop's.
  net::any_io_executor executor() { return stream_.get_executor(); }

  void Evict() override {
    net::post(executor(), [self = Self()] {
      beast::error_code ignored;
      self->Lowest().socket().close(ignored);  // pending operations end: the connection goes
    });
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  ConnectionTable& table() { return *env_->table; }

  void Arm(absl::Duration after, HttpClose reason);
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }
  void OnDeadline() {
    if (deadline_ == HttpClose::kBodyRate) return CheckBodyRate();
    TimeOut(deadline_);
  }
  void TimeOut(HttpClose reason);
  void WaitForRequest();
  void OnFirstByte(beast::error_code ec, size_t n);
  void Handshake();
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void ReadKnownLength();
  // Bytes of the body received so far (chunked: its payload).
  uint64_t BodyProgress() const { return chunked_ ? parser_->get().body().size() : body_progress_; }
  void CheckBodyRate();
  void Refuse(beast::error_code ec);
  void RefuseWith(int status, const std::string& why,
                  std::optional<absl::Duration> retry = std::nullopt);
  void Dispatch();
  void Send(HttpResponse r);
  void OnWritten(beast::error_code ec);
  void Close();
  void Linger();

  const ConnectionEnv* const env_;
  const HttpTransportOptions& options_;
  Stream stream_;
  net::steady_timer timer_;
  const bool counted_;
  uint64_t timer_generation_ = 0;
  HttpClose deadline_ = HttpClose::kHeaderTimeout;  // what timer_ is for
  std::optional<HttpClose> timed_out_;              // the deadline that ended a read
  bool handshaken_ = false;                         // TLS
  bool chunked_ = false;                            // the body being read
  uint64_t body_progress_ = 0;  // a known length's bytes read after the header's
  uint64_t window_start_ = 0;   // BodyProgress() when the rate window began
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

// Sets the one deadline, replacing the previous one (whose handler, if
// already queued, sees a newer generation and does nothing).
template <class Stream>
void Connection<Stream>::Arm(absl::Duration after, HttpClose reason) {
  const uint64_t generation = ++timer_generation_;
  deadline_ = reason;
  timer_.expires_after(absl::ToChronoNanoseconds(after));
  timer_.async_wait([weak = std::weak_ptr<Connection>(Self()), generation](beast::error_code ec) {
    std::shared_ptr<Connection> self = weak.lock();
    if (ec || self == nullptr || generation != self->timer_generation_) return;
    self->OnDeadline();
  });
}

// Ends the read in progress (idle wait, handshake, header or body): the
// pending operation is cancelled, and any read after it sees the end of
// the stream (a composed read whose next step was already queued, when
// the deadline came, cannot go on); its handler then answers 408 (writing
// still works) or closes.
template <class Stream>
void Connection<Stream>::TimeOut(HttpClose reason) {
  timed_out_ = reason;
  beast::error_code ignored;
  Lowest().socket().cancel(ignored);
  Lowest().socket().shutdown(tcp::socket::shutdown_receive, ignored);
}

// Waits, idle, for a request's first byte: at the cap, a new connection
// may close this one meanwhile. A TLS connection waits for its handshake's
// first byte, then (handshake done) again for its request's.
template <class Stream>
void Connection<Stream>::WaitForRequest() {
  Lowest().expires_never();  // timer_ governs reads until the body
  table().EnterIdle(this);
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

template <class Stream>
void Connection<Stream>::OnFirstByte(beast::error_code ec, size_t n) {
  if (!table().LeaveIdle(this)) return;  // closed to make room
  buffer_.commit(n);
  if (ec) {
    // Silent until a deadline (the header's for a new connection, the
    // idle one's for a keep-alive one): closed without an answer.
    if (timed_out_.has_value()) table().Record(*timed_out_);
    return;  // or the client closed, or reset
  }
  if (deadline_ == HttpClose::kIdleTimeout) {
    // A keep-alive connection's next request: its header from now.
    Arm(options_.header_timeout, HttpClose::kHeaderTimeout);
  }
  if constexpr (kTls) {
    if (!handshaken_) return Handshake();
  }
  ReadHeader();
}

template <class Stream>
void Connection<Stream>::Handshake() {
  if constexpr (kTls) {
    stream_.async_handshake(net::ssl::stream_base::server, [self = Self()](beast::error_code ec) {
      if (ec) {
        // Not TLS, refused, or too late: closed unanswered.
        if (self->timed_out_.has_value()) self->table().Record(*self->timed_out_);
        return;
      }
      self->handshaken_ = true;
      self->WaitForRequest();
    });
  }
}

template <class Stream>
void Connection<Stream>::ReadHeader() {
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
  parser_->get().body().CountAgainst(env_->pipeline,
                                     static_cast<uint64_t>(options_.max_body_bytes));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = Self()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

template <class Stream>
void Connection<Stream>::OnHeader(beast::error_code ec) {
  if (ec) return Refuse(ec);
  Disarm();  // the header is in
  const auto& header = parser_->get();
  if (parser_->is_done()) return Dispatch();
  if (!parser_->chunked() && parser_->content_length()) {
    // A declared length counts against the in-flight budget before any
    // of it is read (or a 100 Continue asks for it): over the budget the
    // answer is 503 and the body is never taken.
    if (absl::Status s = parser_->get().body().ReserveExact(*parser_->content_length()); !s.ok()) {
      return RefuseWith(env_->protocol->status_of(s), std::string(s.message()), RetryDelay(s));
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

template <class Stream>
void Connection<Stream>::ReadBody() {
  if (options_.min_body_rate > 0) {
    Lowest().expires_never();
    body_progress_ = 0;
    window_start_ = 0;
    Arm(options_.body_rate_window, HttpClose::kBodyRate);
  } else {
    Lowest().expires_after(kIoTimeout);
  }
  if (parser_->chunked() || !parser_->content_length()) {
    // Chunked: Beast decodes it into RequestBody.
    chunked_ = true;
    return http::async_read(stream_, buffer_, *parser_,
                            [self = Self()](beast::error_code ec, size_t) {
                              if (ec) return self->Refuse(ec);
                              self->Dispatch();
                            });
  }
  ReadKnownLength();
}

// A known length (under the limit: the parser checked it with the header;
// reserved in OnHeader): what came with the header, then the rest read
// straight into the body.
template <class Stream>
void Connection<Stream>::ReadKnownLength() {
  chunked_ = false;
  const uint64_t length = *parser_->content_length();
  BodyBytes& body = parser_->get().body();
  const size_t have = std::min<uint64_t>(buffer_.size(), length);
  // Within the room reserved for `length`: cannot be refused.
  AppendTo(body, beast::buffers_prefix(have, buffer_.data())).IgnoreError();
  buffer_.consume(have);
  if (have == length) return Dispatch();
  net::async_read(
      stream_, net::buffer(body.end(), length - have),
      [this](const beast::error_code& ec, size_t n) -> size_t {
        body_progress_ = n;  // for the rate check
        return ec ? 0 : kBodyReadBytes;
      },
      [self = Self()](beast::error_code ec, size_t n) {
        // Too slow: 408; the client went away or stalled: the connection
        // ends, and with it the body and its reservation.
        if (ec) return self->timed_out_.has_value() ? self->Refuse(ec) : void();
        self->parser_->get().body().Grow(n);
        self->Dispatch();
      });
}

// Every body_rate_window: the window's bytes must reach the rate, unless
// bytes wait unread in the socket (then this loop is the one behind, not
// the client).
template <class Stream>
void Connection<Stream>::CheckBodyRate() {
  const uint64_t progress = BodyProgress();
  const auto need = static_cast<uint64_t>(static_cast<double>(options_.min_body_rate) *
                                          absl::ToDoubleSeconds(options_.body_rate_window));
  beast::error_code ec;
  if (progress - window_start_ < need && Lowest().socket().available(ec) == 0) {
    return TimeOut(HttpClose::kBodyRate);
  }
  window_start_ = progress;
  Arm(options_.body_rate_window, HttpClose::kBodyRate);
}

// A request that cannot be read: the error its client expects when there
// is one to give, then close; nothing for a connection that ended.
template <class Stream>
void Connection<Stream>::Refuse(beast::error_code ec) {
  int status = 400;
  std::string why;
  std::optional<absl::Duration> retry;
  if (timed_out_.has_value()) {
    table().Record(*timed_out_);
    status = 408;
    if (*timed_out_ == HttpClose::kBodyRate) {
      why = absl::StrCat("the request body came slower than ", options_.min_body_rate,
                         " bytes/s over ", absl::FormatDuration(options_.body_rate_window),
                         " (--http_min_body_rate)");
    } else {
      why = absl::StrCat("the request header was not complete within ",
                         absl::FormatDuration(options_.header_timeout), " (--http_header_timeout)");
    }
  } else if (parser_.has_value() && !parser_->get().body().refusal().ok()) {
    // A chunked body the in-flight budget could not take (503).
    const absl::Status& refusal = parser_->get().body().refusal();
    status = env_->protocol->status_of(refusal);
    why = std::string(refusal.message());
    retry = RetryDelay(refusal);
  } else if (ec == http::error::body_limit) {
    status = 413;
    why = absl::StrCat("the request body is over the limit of ", options_.max_body_bytes,
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

// Answers `status` with the protocol's error saying `why` (and Retry-After
// when `retry` says when to come back) and closes after lingering: the body
// (if any) is not read, so the client may still be sending it.
template <class Stream>
void Connection<Stream>::RefuseWith(int status, const std::string& why,
                                    std::optional<absl::Duration> retry) {
  Disarm();
  // What was read of the body and its reservation go back now, not when
  // the connection ends.
  parser_.reset();
  version_ = 11;
  keep_alive_ = false;
  head_ = false;
  linger_ = true;
  HttpResponse r = env_->protocol->error(status, why);
  AddRetryAfter(retry, &r);
  r.close = true;
  Send(std::move(r));
}

template <class Stream>
void Connection<Stream>::Dispatch() {
  Disarm();
  Lowest().expires_never();  // the call's own deadline governs now
  auto& message = parser_->get();
  keep_alive_ = message.keep_alive();
  version_ = message.version();
  head_ = message.method() == http::verb::head;
  HttpRequest req;
  req.method = MethodOf(message.method());
  req.target = std::string(message.target());
  for (const auto& field : message) {
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  req.body = std::move(message.body());
  parser_.reset();
  HttpExecutor loop = [executor = stream_.get_executor()](std::function<void()> fn) {
    net::post(executor, std::move(fn));
  };
  env_->protocol->route(std::move(req), std::move(loop),
                        [self = Self()](HttpResponse r) { self->Send(std::move(r)); });
}

template <class Stream>
void Connection<Stream>::Send(HttpResponse r) {
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

template <class Stream>
void Connection<Stream>::OnWritten(beast::error_code ec) {
  const bool keep = !ec && response_->keep_alive();
  response_.reset();         // gives the outputs' buffers back now, not at the next answer
  answer_ticket_.Release();  // and their bytes of the budget
  if (ec) return;
  if (!keep) return Close();
  if (buffer_.size() > 0) {
    // Pipelined: the next request has begun.
    Arm(options_.header_timeout, HttpClose::kHeaderTimeout);
    return ReadHeader();
  }
  Arm(options_.idle_timeout, HttpClose::kIdleTimeout);
  WaitForRequest();
}

// After an answer that ends the connection.
template <class Stream>
void Connection<Stream>::Close() {
  if constexpr (kTls) {
    // Closing: the cap may close it sooner to make room.
    if (counted_) table().EnterIdle(this);
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
      if (counted_) table().EnterIdle(this);
      Lowest().expires_after(linger_time_);
      linger_buffer_ = std::make_unique<char[]>(kLingerBufferBytes);
      Linger();
    }
  }
}

template <class Stream>
void Connection<Stream>::Linger() {
  Lowest().async_read_some(net::buffer(linger_buffer_.get(), kLingerBufferBytes),
                           [self = Self()](beast::error_code ec, size_t) {
                             if (!ec) self->Linger();  // EOF, an error or the time limit: close
                           });
}

}  // namespace

void ServeConnection(const ConnectionEnv* env, tcp::socket socket, net::ssl::context* tls,
                     bool counted) {
  if (tls != nullptr) {
    using TlsStream = beast::ssl_stream<beast::tcp_stream>;
    auto c = std::make_shared<Connection<TlsStream>>(
        env, TlsStream(beast::tcp_stream(std::move(socket)), *tls), counted);
    net::post(c->executor(), [c, counted] { counted ? c->Start() : c->StartRefused(); });
  } else {
    auto c = std::make_shared<Connection<beast::tcp_stream>>(
        env, beast::tcp_stream(std::move(socket)), counted);
    net::post(c->executor(), [c, counted] { counted ? c->Start() : c->StartRefused(); });
  }
}

}  // namespace tensorops
