#include "server/server_sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace tensorops {
namespace {

// True if `fd` is a socket whose local address is one of `served`; sets
// *listening for a listening socket.
bool IsServedSocket(int fd, const ServedAddresses& served, bool* listening) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr;
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  bool match = false;
  if (addr.ss_family == AF_INET || addr.ss_family == AF_INET6) {
    const int port =
        ntohs(addr.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&addr)->sin_port
                                        : reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    match =
        std::find(served.tcp_ports.begin(), served.tcp_ports.end(), port) != served.tcp_ports.end();
  } else if (addr.ss_family == AF_UNIX) {
    // An accepted Unix socket reports its listener's path.
    const auto* un = reinterpret_cast<const sockaddr_un*>(&addr);
    const size_t path_len = strnlen(un->sun_path, len - offsetof(sockaddr_un, sun_path));
    const std::string path(un->sun_path, path_len);
    match = !path.empty() && std::find(served.unix_paths.begin(), served.unix_paths.end(), path) !=
                                 served.unix_paths.end();
  }
  if (!match) return false;
  int accepting = 0;
  socklen_t optlen = sizeof(accepting);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &optlen) != 0) return false;
  *listening = accepting != 0;
  return true;
}

// Calls fn(fd, listening) for every served socket of this process.
void ForEachServedSocket(const ServedAddresses& served, const std::function<void(int, bool)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    bool listening = false;
    if (IsServedSocket(static_cast<int>(fd), served, &listening))
      fn(static_cast<int>(fd), listening);
  }
  closedir(dir);
}

}  // namespace

std::vector<int> ShutdownListeners(const ServedAddresses& served) {
  std::vector<int> listeners;
  ForEachServedSocket(served, [&](int fd, bool listening) {
    if (!listening) return;
    listeners.push_back(fd);
    shutdown(fd, SHUT_RDWR);
  });
  return listeners;
}

int ShutdownConnections(const ServedAddresses& served, const std::vector<int>& listeners) {
  int found = 0;
  ForEachServedSocket(served, [&](int fd, bool listening) {
    // A listener shut down no longer reports SO_ACCEPTCONN: skip it by descriptor.
    if (listening || std::find(listeners.begin(), listeners.end(), fd) != listeners.end()) return;
    ++found;
    shutdown(fd, SHUT_RDWR);
  });
  return found;
}

}  // namespace tensorops
