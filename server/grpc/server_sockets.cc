#include "server/grpc/server_sockets.h"

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tensorops {
namespace {

constexpr int kTcpListen = 0x0A;              // TCP_LISTEN in /proc/net/tcp's "st"
constexpr uint64_t kUnixAcceptCon = 0x10000;  // __SO_ACCEPTCON in /proc/net/unix's "Flags"

uint64_t Hex(absl::string_view s) { return std::strtoull(std::string(s).c_str(), nullptr, 16); }

// Socket inode -> listening, for every socket of this network namespace whose
// local address is one of `served`. Read from /proc/net rather than by asking
// each descriptor (fstat, getsockname), so the scan never touches a
// descriptor that is not a served socket: other threads (the metrics HTTP
// server's) open and close theirs at any moment.
absl::flat_hash_map<uint64_t, bool> ServedInodes(const ServedAddresses& served) {
  absl::flat_hash_map<uint64_t, bool> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 10) continue;
      const size_t colon = f[1].rfind(':');
      if (colon == absl::string_view::npos) continue;
      const int port = static_cast<int>(Hex(f[1].substr(colon + 1)));
      if (std::find(served.tcp_ports.begin(), served.tcp_ports.end(), port) ==
          served.tcp_ports.end()) {
        continue;
      }
      uint64_t inode = 0;
      if (absl::SimpleAtoi(f[9], &inode) && inode != 0) {
        inodes[inode] = Hex(f[3]) == kTcpListen;
      }
    }
  }
  if (!served.unix_paths.empty()) {
    std::ifstream in("/proc/net/unix");
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // Num RefCount Protocol Flags Type St Inode Path (an accepted socket
      // shows its listener's path).
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 8) continue;
      if (std::find(served.unix_paths.begin(), served.unix_paths.end(), f[7]) ==
          served.unix_paths.end()) {
        continue;
      }
      uint64_t inode = 0;
      if (absl::SimpleAtoi(f[6], &inode) && inode != 0) {
        inodes[inode] = (Hex(f[3]) & kUnixAcceptCon) != 0;
      }
    }
  }
  return inodes;
}

// Calls fn(fd, listening) for every descriptor of this process that is one
// of the served sockets ("/proc/self/fd/N -> socket:[INODE]").
void ForEachServedSocket(const ServedAddresses& served, const std::function<void(int, bool)>& fn) {
  const absl::flat_hash_map<uint64_t, bool> inodes = ServedInodes(served);
  if (inodes.empty()) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;
    char target[64];
    const ssize_t n =
        readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    absl::string_view link(target, static_cast<size_t>(n));
    uint64_t inode = 0;
    if (!absl::ConsumePrefix(&link, "socket:[") || !absl::ConsumeSuffix(&link, "]") ||
        !absl::SimpleAtoi(link, &inode)) {
      continue;
    }
    auto it = inodes.find(inode);
    if (it != inodes.end()) fn(fd, it->second);
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
    // A listener shut down is no longer listening: skip it by descriptor.
    if (listening || std::find(listeners.begin(), listeners.end(), fd) != listeners.end()) return;
    ++found;
    // SHUT_WR only: a FIN after the bytes still queued. Shutting the read
    // side too made the kernel answer the client's next frames (window
    // updates, pings) with a reset, which throws away whatever of the last
    // reply was still in the send queue: a stream finished before the drain
    // ended "Connection reset by peer" at its client (2 of 8 runs of
    // DrainTest.StreamMidUploadAtSigtermEndsOk). The client reads to the FIN,
    // closes, and gRPC then closes this descriptor.
    shutdown(fd, SHUT_WR);
  });
  return found;
}

}  // namespace tensorops
