#include "server/http/http_transport.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "server/core/logging.h"
#include "server/http/connection.h"
#include "server/http/connection_table.h"

namespace tensorops {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// The transport proper; HttpTransport is its handle. Thread-safety: the
// members are set before the loops start and read-only after, but for the
// acceptor's (loop 0's thread only) and the connection table (its own lock).
class HttpTransport::Impl {
 public:
  Impl(CallPipeline* pipeline, HttpProtocol protocol, const Options& options)
      : protocol_(std::move(protocol)),
        options_(options),
        table_(RegisterHttpConnections(pipeline->metrics()), options.max_connections),
        env_{&options_, pipeline, &table_, &protocol_} {}
  ~Impl();

  // The loops, TLS, the listening socket: the port bound, or why not.
  absl::StatusOr<int> Listen();
  // Starts accepting and runs the loops.
  void Run();
  void Stop();

 private:
  void Accept();
  void AcceptFailed(const error_code& ec);
  absl::StatusOr<tcp::endpoint> Resolve(net::io_context& io);

  const HttpProtocol protocol_;
  const Options options_;
  ConnectionTable table_;  // before the loops: connections leave it as they go
  const ConnectionEnv env_;
  std::unique_ptr<net::ssl::context> tls_;  // HTTPS only when set

  struct Loop {
    net::io_context io{1};  // one thread runs it
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops_;
  std::optional<tcp::acceptor> acceptor_;  // on loops_[0]
  std::optional<net::steady_timer> accept_backoff_;
  size_t next_loop_ = 0;
  // Out of descriptors (EMFILE), a connection waiting in the backlog could
  // be neither accepted nor refused: this one (/dev/null) is given up to
  // accept and close them (AcceptFailed), then taken again.
  int spare_fd_ = -1;
  std::chrono::steady_clock::time_point last_accept_warning_;
};

HttpTransport::Impl::~Impl() {
  Stop();
  // Connections first (their sockets belong to the loops' io_contexts).
  for (auto& loop : loops_) loop->work.reset();
  loops_.clear();
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

absl::StatusOr<tcp::endpoint> HttpTransport::Impl::Resolve(net::io_context& io) {
  error_code ec;
  const net::ip::address address = net::ip::make_address(options_.host, ec);
  if (!ec) return tcp::endpoint(address, static_cast<uint16_t>(options_.port));
  // A host name (localhost): its first address.
  tcp::resolver resolver(io);
  auto found = resolver.resolve(options_.host, std::to_string(options_.port), ec);
  if (ec || found.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_host '", options_.host, "' does not resolve: ", ec.message()));
  }
  return found.begin()->endpoint();
}

absl::StatusOr<int> HttpTransport::Impl::Listen() {
  if (options_.tls != nullptr) {
    // Asio's context takes a reference of its own on the SSL_CTX.
    SSL_CTX_up_ref(options_.tls.get());
    tls_ = std::make_unique<net::ssl::context>(options_.tls.get());
  }
  int loops = options_.loops;
  if (loops <= 0) {
    loops = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                       Options::kMaxDefaultLoops);
  }
  for (int i = 0; i < loops; ++i) loops_.push_back(std::make_unique<Loop>());
  net::io_context& io0 = loops_[0]->io;
  absl::StatusOr<tcp::endpoint> endpoint = Resolve(io0);
  if (!endpoint.ok()) return endpoint.status();
  error_code ec;
  acceptor_.emplace(io0);
  acceptor_->open(endpoint->protocol(), ec);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(*endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.host, ":",
                                               options_.port, ": ", ec.message()));
  }
  const tcp::endpoint bound = acceptor_->local_endpoint(ec);
  if (ec) return absl::InternalError(absl::StrCat("HTTP socket: ", ec.message()));
  accept_backoff_.emplace(io0);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return bound.port();
}

void HttpTransport::Impl::Run() {
  Accept();
  for (auto& loop : loops_) {
    loop->work.emplace(loop->io.get_executor());
    loop->thread = std::thread([io = &loop->io] { io->run(); });
  }
}

void HttpTransport::Impl::Stop() {
  for (auto& loop : loops_) loop->io.stop();
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
  }
  // No loop runs now: the acceptor and the connections (owned by the
  // handlers still queued) go with the io_contexts.
  accept_backoff_.reset();
  acceptor_.reset();
}

void HttpTransport::Impl::Accept() {
  Loop& loop = *loops_[next_loop_++ % loops_.size()];
  acceptor_->async_accept(loop.io, [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) return AcceptFailed(ec);
    std::shared_ptr<ConnectionBase> evict;
    const ConnectionTable::Admission admission = table_.Admit(&evict);
    if (evict != nullptr) evict->Evict();
    if (admission == ConnectionTable::Admission::kDrop) return Accept();  // `socket` closes
    // No Nagle: an answer's last partial segment must not wait for the
    // client's delayed ACK (40 ms a call with binary replies of 64 KiB).
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    ServeConnection(&env_, std::move(socket), tls_.get(),
                    admission == ConnectionTable::Admission::kOpen);
    Accept();
  });
}

void HttpTransport::Impl::AcceptFailed(const error_code& ec) {
  int64_t shed = 0;
  if (ec == net::error::no_descriptors ||
      ec == boost::system::errc::too_many_files_open_in_system) {
    // Out of descriptors: the backlog's connections could be neither served
    // nor refused and would wait there unanswered (libev's and libuv's
    // remedy): give up the spare descriptor, accept each waiting connection
    // and close it at once, then take the spare back.
    if (spare_fd_ >= 0) ::close(spare_fd_);
    for (; shed < 1024; ++shed) {
      const int fd =
          ::accept4(acceptor_->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      // Before the close: the peer may look at once.
      table_.Record(HttpClose::kNoDescriptors);
      ::close(fd);
    }
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  // One line per 10 s at most: a flood would otherwise write one per retry.
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_warning_ >= std::chrono::seconds(10)) {
    last_accept_warning_ = now;
    Log(LogLevel::kWarning,
        absl::StrCat(
            "HTTP accept failed: ", ec.message(),
            shed > 0 ? absl::StrCat("; ", shed, " waiting connections closed unanswered") : "",
            "; retrying (further failures in the next 10 s not logged)"));
  }
  // Wait instead of spinning on it; the door never stops accepting.
  accept_backoff_->expires_after(std::chrono::milliseconds(50));
  accept_backoff_->async_wait([this](error_code e) {
    if (!e) Accept();
  });
}

HttpTransport::HttpTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Start(CallPipeline* pipeline,
                                                                    HttpProtocol protocol,
                                                                    const Options& options) {
  auto impl = std::make_unique<Impl>(pipeline, std::move(protocol), options);
  absl::StatusOr<int> port = impl->Listen();
  if (!port.ok()) return port.status();
  std::unique_ptr<HttpTransport> t(new HttpTransport(std::move(impl)));
  t->port_ = *port;
  t->impl_->Run();
  return t;
}

void HttpTransport::Stop() {
  if (stopped_) return;
  stopped_ = true;
  impl_->Stop();
}

HttpTransport::~HttpTransport() { Stop(); }

}  // namespace tensorops
