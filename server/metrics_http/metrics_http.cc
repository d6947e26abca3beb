#include "server/metrics_http/metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tensorops {
namespace {

// The addresses a connection to the metrics endpoint bound on host:port
// reaches it by: host resolved, a wildcard (0.0.0.0, ::) replaced by its
// family's loopback.
std::vector<sockaddr_storage> EndpointAddresses(const std::string& host, int port) {
  std::vector<sockaddr_storage> out;
  std::string name(absl::StripSuffix(absl::StripPrefix(host, "["), "]"));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return out;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, a->ai_addr, a->ai_addrlen);
    if (ss.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
      if (v4->sin_addr.s_addr == htonl(INADDR_ANY)) v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (ss.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
      if (IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) v6->sin6_addr = in6addr_loopback;
    } else {
      continue;
    }
    out.push_back(ss);
  }
  freeaddrinfo(list);
  return out;
}

// Opens and at once closes a connection to each address, without waiting.
void Knock(const std::vector<sockaddr_storage>& addresses) {
  for (const sockaddr_storage& ss : addresses) {
    const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const socklen_t len = ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    (void)connect(fd, reinterpret_cast<const sockaddr*>(&ss), len);
    close(fd);
  }
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (exposer_ == nullptr) return;
  // civetweb 1.15's listener thread polls its sockets in rounds of 2 s
  // (SOCKET_TIMEOUT_QUANTUM) and reads the stop flag only between rounds, so
  // ~Exposer took 1.4 s on every stop of an idle server (measured), most of a
  // stop's time, and one second of every test server's. A connection ends the
  // round at once: knock until the exposer is gone. Each knock closes at once,
  // so a knock accepted before the stop flag is set costs a worker nothing.
  const std::vector<sockaddr_storage> addresses = EndpointAddresses(host_, port_);
  absl::Notification stopped;
  std::thread knocker([&] {
    while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(5))) Knock(addresses);
  });
  exposer_.reset();
  stopped.Notify();
  knocker.join();
}

absl::StatusOr<int> MetricsHttpServer::Start(const std::string& host, int port) {
  const std::string address = absl::StrCat(host, ":", port);
  if (exposer_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics HTTP server already started; cannot also serve on ", address));
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    // civetweb reports bind failures (address in use, bad host) by throwing.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics HTTP server on ", address, " reports no listening port"));
  }
  exposer->RegisterCollectable(registry_);
  exposer_ = std::move(exposer);
  host_ = host;
  port_ = ports.front();
  return ports.front();
}

}  // namespace tensorops
