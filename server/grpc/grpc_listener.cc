#include "server/grpc/grpc_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <utility>

#include "absl/base/dynamic_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/logging.h"
#include "server/core/metrics.h"
#include "server/grpc/grpc_metrics.h"

namespace tensorops {
namespace {

// How often the live connections are swept for the gauge when nothing
// forces it; at the cap, a sweep at most this often (each costs about
// 0.45 us per live connection).
constexpr int64_t kSweepIntervalNs = 1'000'000'000;
constexpr int64_t kCapSweepIntervalNs = 5'000'000;
// Back-off after an accept failed for want of descriptors (the pending
// connection was closed; the next may fail the same way), and after any
// other failure.
constexpr int64_t kOutOfDescriptorsBackoffNs = 10'000'000;
constexpr int64_t kErrorBackoffNs = 100'000'000;
// Rate limit of the log lines about refusals and errors.
constexpr int64_t kLogIntervalNs = 10'000'000'000;
// Connections accepted from one socket before the others get a turn.
constexpr int kAcceptBurst = 64;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string Errno(int error) { return std::strerror(error); }

// "host:port", "[v6]:port" or "v6:port" -> host, port.
bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  std::string port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return false;
    }
    *host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    // The last ':' ends the host, also for an unbracketed IPv6 literal
    // ("::1:50051", as --host=::1 with --port makes it).
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return false;
    *host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  return absl::SimpleAtoi(port_text, port) && *port >= 0 && *port <= 65535;
}

// A listening socket for `addr`; -1 with errno set on failure.
int ListenOn(const sockaddr* addr, socklen_t len, bool dual_stack) {
  const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  const int zero = 0;
  bool ok = true;
  if (addr->sa_family != AF_UNIX) {
    ok = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
         // Inherited by accepted sockets: gRPC's own listener sets it too;
         // small replies must not wait for Nagle.
         setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
    if (ok && addr->sa_family == AF_INET6) {
      ok = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof(int)) == 0;
    }
  }
  if (ok) ok = bind(fd, addr, len) == 0 && listen(fd, SOMAXCONN) == 0;
  if (!ok) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

GrpcListener::GrpcListener(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Start(Options options) {
  if (options.addresses.empty() || options.max_connections < 1 || !options.hand_off) {
    return absl::InvalidArgumentError(
        "GrpcListener: needs an address, max_connections >= 1 and a hand-off");
  }
  // On an error below, the destructor closes (and unlinks) what was opened.
  std::unique_ptr<GrpcListener> l(new GrpcListener(std::move(options)));
  for (const std::string& address : l->options_.addresses) {
    int port = 0;
    if (absl::Status st = l->Bind(address, &port); !st.ok()) return st;
    l->ports_.push_back(port);
  }
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  l->spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (l->wake_fd_ < 0 || l->spare_fd_ < 0) {
    return absl::InternalError(absl::StrCat("GrpcListener: eventfd or /dev/null: ", Errno(errno)));
  }
  l->last_sweep_ns_ = NowNs();
  if (l->options_.connections != nullptr) l->options_.connections->SetOpen(0);
  GrpcListener* self = l.get();
  l->thread_ = std::thread([self] { self->Loop(); });
  return l;
}

absl::Status GrpcListener::Bind(const std::string& address, int* port) {
  const auto fail = [&address](const std::string& why) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", why));
  };
  *port = 0;
  std::string why;
  const bool abstract = absl::StartsWith(address, "unix-abstract:");
  if (abstract || absl::StartsWith(address, "unix:")) {
    why = BindUnix(address.substr(abstract ? 14 : 5), abstract);
    return why.empty() ? absl::OkStatus() : fail(why);
  }
  std::string host;
  int want_port = 0;
  if (!SplitHostPort(address, &host, &want_port)) return fail("not host:port or unix:path");
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") {
    why = BindWildcard(want_port, port);
  } else {
    why = BindResolved(host, want_port, port);
  }
  return why.empty() ? absl::OkStatus() : fail(why);
}

std::string GrpcListener::BindUnix(const std::string& path, bool abstract) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (path.empty() || path.size() + 1 > sizeof(un.sun_path)) return "bad socket path";
  socklen_t len = sizeof(un);
  if (abstract) {
    // A leading NUL names the abstract namespace; the length says where
    // the name ends.
    std::memcpy(un.sun_path + 1, path.data(), path.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + path.size());
  } else {
    std::memcpy(un.sun_path, path.data(), path.size());
    // A socket file left by an earlier run would make bind fail; gRPC's
    // own listener removes it too (never a file that is not a socket).
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
  }
  const int fd = ListenOn(reinterpret_cast<sockaddr*>(&un), len, false);
  if (fd < 0) return Errno(errno);
  Socket s;
  s.fd = fd;
  if (!abstract) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      s.unix_path = path;
      s.unix_inode = st.st_ino;
    }
  }
  sockets_.push_back(std::move(s));
  return "";
}

std::string GrpcListener::BindWildcard(int want_port, int* port) {
  // IPv6 in dual-stack mode, which also takes IPv4, as gRPC's listener
  // does; IPv4 alone where there is no IPv6.
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_addr = in6addr_any;
  in6.sin6_port = htons(static_cast<uint16_t>(want_port));
  int fd = ListenOn(reinterpret_cast<sockaddr*>(&in6), sizeof(in6), true);
  if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
    sockaddr_in in4{};
    in4.sin_family = AF_INET;
    in4.sin_addr.s_addr = htonl(INADDR_ANY);
    in4.sin_port = htons(static_cast<uint16_t>(want_port));
    fd = ListenOn(reinterpret_cast<sockaddr*>(&in4), sizeof(in4), false);
  }
  if (fd < 0) return Errno(errno);
  sockets_.push_back(Socket{fd, true, "", 0});
  *port = BoundPort(fd);
  return "";
}

std::string GrpcListener::BindResolved(const std::string& host, int want_port, int* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return gai_strerror(rc);
  }
  absl::Cleanup free_found = [found] { freeaddrinfo(found); };
  // Every address the name resolves to (localhost: 127.0.0.1 and ::1), on
  // one port: the first bind picks it when the port is 0. An address this
  // host cannot bind (no IPv6) is skipped as long as one is bound.
  int bound = 0;
  std::string first_error;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    const int use_port = bound > 0 ? *port : want_port;
    if (ss.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(use_port));
    } else if (ss.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(use_port));
    } else {
      continue;
    }
    const int fd = ListenOn(reinterpret_cast<sockaddr*>(&ss), ai->ai_addrlen, false);
    if (fd < 0) {
      if (first_error.empty()) first_error = Errno(errno);
      continue;
    }
    sockets_.push_back(Socket{fd, true, "", 0});
    if (bound++ == 0) *port = BoundPort(fd);
  }
  if (bound == 0) return first_error.empty() ? "no address" : first_error;
  return "";
}

GrpcListener::~GrpcListener() { Stop(); }

void GrpcListener::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    // An eventfd write of 1 cannot fail short of overflow.
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (const Socket& s : sockets_) {
    close(s.fd);
    // Remove the socket file only while it is still ours (a new server may
    // already have bound the path).
    struct stat st;
    if (!s.unix_path.empty() && stat(s.unix_path.c_str(), &st) == 0 && st.st_ino == s.unix_inode) {
      unlink(s.unix_path.c_str());
    }
  }
  sockets_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
  wake_fd_ = spare_fd_ = -1;
}

void GrpcListener::Loop() {
  std::vector<bool> alive(sockets_.size(), true);
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  for (;;) {
    const int64_t now = NowNs();
    fds.clear();
    which.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    int64_t timeout_ns = std::max<int64_t>(0, last_sweep_ns_ + kSweepIntervalNs - now);
    if (now < backoff_until_ns_) {
      timeout_ns = std::min(timeout_ns, backoff_until_ns_ - now);
    } else {
      for (size_t i = 0; i < sockets_.size(); ++i) {
        if (!alive[i]) continue;
        fds.push_back({sockets_[i].fd, POLLIN, 0});
        which.push_back(i);
      }
    }
    const int rc =
        poll(fds.data(), fds.size(), static_cast<int>((timeout_ns + 999'999) / 1'000'000));
    if (rc < 0 && errno != EINTR) {
      Log(LogLevel::kError, absl::StrCat("grpc listener: poll: ", Errno(errno)));
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    if (fds[0].revents != 0) return;  // Stop
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      if (!AcceptAll(sockets_[which[k - 1]])) alive[which[k - 1]] = false;
      if (NowNs() < backoff_until_ns_) break;
    }
    if (NowNs() >= last_sweep_ns_ + kSweepIntervalNs) {
      absl::MutexLock lock(&live_mu_);
      Sweep();
      last_sweep_ns_ = NowNs();
      PublishCount();
    }
  }
}

bool GrpcListener::AcceptAll(const Socket& s) {
  for (int n = 0; n < kAcceptBurst; ++n) {
    const int fd = accept4(s.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      OnConnection(fd, s.tcp);
      continue;
    }
    const int error = errno;
    switch (error) {
      case EAGAIN:
#if EAGAIN != EWOULDBLOCK
      case EWOULDBLOCK:
#endif
        return true;
      case EINTR:
      case ECONNABORTED:  // the client gave up while in the backlog
      case EPROTO:
      case EPERM:  // a firewall rule
        continue;
      case EMFILE:
      case ENFILE:
        OnOutOfDescriptors(s, error);
        return true;
      case EBADF:
      case EINVAL:  // shut down under us (a drain's ShutdownListeners)
      case ENOTSOCK:
        return false;
      default: {
        const int64_t now = NowNs();
        if (now >= next_error_log_ns_) {
          next_error_log_ns_ = now + kLogIntervalNs;
          Log(LogLevel::kError,
              absl::StrCat("grpc listener: accept4: ", Errno(error), "; retrying in 100 ms"));
        }
        backoff_until_ns_ = now + kErrorBackoffNs;
        return true;
      }
    }
  }
  return true;
}

void GrpcListener::OnConnection(int fd, bool tcp) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  const int64_t now = NowNs();
  {
    absl::MutexLock lock(&live_mu_);
    if (static_cast<int64_t>(live_.size()) >= options_.max_connections &&
        now >= last_sweep_ns_ + kCapSweepIntervalNs) {
      Sweep();
      last_sweep_ns_ = NowNs();
    }
    if (static_cast<int64_t>(live_.size()) >= options_.max_connections) {
      // Counted before the close: a peer that sees the close may read the
      // count at once (tests, /metrics scraped after a refused connect).
      refused_cap_.fetch_add(1, std::memory_order_relaxed);
      if (options_.connections != nullptr) {
        options_.connections->RecordClosed(static_cast<int>(ConnectionRefusal::kCap));
      }
      close(fd);
      ++cap_unlogged_;
      if (now >= next_cap_log_ns_) {
        next_cap_log_ns_ = now + kLogIntervalNs;
        Log(LogLevel::kWarning,
            absl::StrCat("grpc: ", cap_unlogged_, " connection(s) closed at accept: ", live_.size(),
                         " open, --grpc_max_connections=", options_.max_connections,
                         " (next such line in 10 s at the earliest)"));
        cap_unlogged_ = 0;
      }
      PublishCount();
      return;
    }
    // A descriptor number gRPC has closed may come back from accept: the
    // entry with the old inode would go at the next sweep; replace it now.
    live_.erase(std::remove_if(live_.begin(), live_.end(),
                               [fd](const Connection& c) { return c.fd == fd; }),
                live_.end());
    live_.push_back(Connection{fd, st.st_ino, st.st_dev});
    PublishCount();
  }
  if (tcp) {
    // accept4 inherits the listener's TCP_NODELAY on Linux; set it anyway,
    // it is the one option a gRPC connection needs.
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  options_.hand_off(fd);
}

void GrpcListener::OnOutOfDescriptors(const Socket& s, int error) {
  // Give the spare descriptor up for one accept, so the pending connection
  // is closed at once rather than left waiting in the backlog (where a
  // level-triggered poll would report it again and again), then take the
  // spare back.
  if (spare_fd_ >= 0) {
    close(spare_fd_);
    spare_fd_ = -1;
  }
  const int fd = accept4(s.fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    refused_emfile_.fetch_add(1, std::memory_order_relaxed);  // before the close, as above
    if (options_.connections != nullptr) {
      options_.connections->RecordClosed(static_cast<int>(ConnectionRefusal::kEmfile));
    }
    close(fd);
    ++emfile_unlogged_;
  }
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int64_t now = NowNs();
  backoff_until_ns_ = now + kOutOfDescriptorsBackoffNs;
  if (now >= next_emfile_log_ns_) {
    next_emfile_log_ns_ = now + kLogIntervalNs;
    int64_t live = 0;
    {
      absl::MutexLock lock(&live_mu_);
      live = static_cast<int64_t>(live_.size());
    }
    Log(LogLevel::kError,
        absl::StrCat("grpc: accept4: ", Errno(error), ": ", emfile_unlogged_,
                     " connection(s) closed at accept, ", live,
                     " open; still accepting (raise the fd limit or lower "
                     "--grpc_max_connections; next such line in 10 s at the earliest)"));
    emfile_unlogged_ = 0;
  }
}

// Whether a connection handed to gRPC has ended. The descriptor is gRPC's:
// it may have closed it, and another thread (an accept of the HTTP door, any
// open) may hold its number again by now. That is what the inode check is
// for: a number that names another file is a connection gone.
// ThreadSanitizer sees an fstat of a descriptor another thread closed or
// reused as a race on the descriptor, so this one call is hidden from it.
bool GrpcListener::IsGone(const Connection& c) {
  struct stat st;
  ABSL_ANNOTATE_IGNORE_READS_BEGIN();
  const int rc = fstat(c.fd, &st);
  ABSL_ANNOTATE_IGNORE_READS_END();
  return rc != 0 || st.st_ino != c.inode || st.st_dev != c.dev;
}

void GrpcListener::Sweep() {
  live_.erase(std::remove_if(live_.begin(), live_.end(), &IsGone), live_.end());
}

void GrpcListener::PublishCount() {
  live_count_.store(static_cast<int64_t>(live_.size()), std::memory_order_relaxed);
  if (options_.connections != nullptr) {
    options_.connections->SetOpen(static_cast<int64_t>(live_.size()));
  }
}

int64_t GrpcListener::SweepForTest() {
  absl::MutexLock lock(&live_mu_);
  Sweep();
  PublishCount();
  return static_cast<int64_t>(live_.size());
}

}  // namespace tensorops
