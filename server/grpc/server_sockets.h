// Transport-level end of a drain: finds this process's sockets that serve
// the gRPC port (the listeners and every accepted connection) and shuts them
// down with shutdown(2).
//
// Why not grpc::Server::Shutdown alone: once it is called, gRPC core cancels
// every stream that reaches it before the client has read the GOAWAY (and
// every request whose body is still arriving), and the client sees CANCELLED,
// which says "you gave up" and which no retry policy retries. Shutting the
// sockets first turns all of those into transport failures, which every gRPC
// client reports as UNAVAILABLE: the listener refuses new connections, and a
// FIN (sent after the bytes already written, so no finished reply is cut)
// ends each connection. When no connection is left, grpc::Server::Shutdown
// has nothing to cancel.
//
// The sockets are found through /proc/net/{tcp,tcp6,unix} (their inodes)
// and /proc/self/fd (which descriptor holds which inode), so no other
// descriptor of the process is ever touched. Linux only.
//
// Thread-safety: the functions are safe to call from any thread; they act
// only on sockets whose local address is one of the given ones.
#ifndef TENSOROPS_SERVER_GRPC_SERVER_SOCKETS_H_
#define TENSOROPS_SERVER_GRPC_SERVER_SOCKETS_H_

#include <string>
#include <vector>

namespace tensorops {

// Where a server listens: TCP ports (any local IP address) and Unix socket paths.
struct ServedAddresses {
  std::vector<int> tcp_ports;
  std::vector<std::string> unix_paths;
};

// Shuts down (SHUT_RDWR) every listening socket of this process whose local
// address is one of `served`: new connections are refused from now on.
// Returns their descriptors; they stay open (and no longer listening) until
// grpc::Server::Shutdown closes them.
std::vector<int> ShutdownListeners(const ServedAddresses& served);

// Shuts down (SHUT_WR: see the .cc) every other socket of this process whose local
// address is one of `served` (the accepted connections; `listeners` from
// ShutdownListeners are skipped) and returns how many there were. Each gets
// a FIN after its pending bytes, and gRPC closes it on the end of input that
// follows, so calling this until it returns 0 waits for every connection to
// be gone.
//
// Example:
//   const std::vector<int> listeners = ShutdownListeners({{port}, {}});
//   while (ShutdownConnections({{port}, {}}, listeners) > 0) absl::SleepFor(...);
int ShutdownConnections(const ServedAddresses& served, const std::vector<int>& listeners);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_SERVER_SOCKETS_H_
