// The file descriptors the server may use, and the connection caps it
// derives from them.
//
// Every accepted connection costs a descriptor, and a process that runs out
// of them fails in ways that outlast the flood: gRPC 1.51 gives up on its
// accept loop after one EMFILE (grpc/grpc issues 16058 and 20418), and any
// file the server opens (a shared-memory region, a log) fails with it. So
// each front door caps its connections, and the caps together leave a
// reserve below the process's RLIMIT_NOFILE for everything else: listeners,
// gRPC's and Asio's own pipes and epoll sets, the metrics endpoint's
// connections, shared-memory regions being mapped.
//
// Example:
//   absl::StatusOr<FdLimit> limit = RaiseFdLimit();
//   FdBudget budget = FdBudgetFor(limit->soft);
//
// Thread-safety: plain functions; RaiseFdLimit changes the process's limit
// and is meant for main, before any thread starts.
#ifndef TENSOROPS_SERVER_FD_BUDGET_H_
#define TENSOROPS_SERVER_FD_BUDGET_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tensorops {

struct FdLimit {
  int64_t soft = 0;  // what the process may open now (after RaiseFdLimit)
  int64_t hard = 0;  // the ceiling the soft limit may be raised to
  int64_t was = 0;   // the soft limit before RaiseFdLimit
};

// Raises the soft RLIMIT_NOFILE to the hard one, at most kMaxFdLimit (as
// Go's runtime does since 1.19 and nginx's worker_rlimit_nofile lets one
// do: the common soft default, 1024, is a relic of select(2), which nothing
// here uses). Returns the limits; an error only when getrlimit fails.
absl::StatusOr<FdLimit> RaiseFdLimit();
constexpr int64_t kMaxFdLimit = int64_t{1} << 20;

// The soft RLIMIT_NOFILE now (kMaxFdLimit when unlimited or unreadable): what
// the caps are derived from when their flags are left at -1.
int64_t CurrentFdLimit();

// Connection caps for a descriptor limit of `fd_limit`.
struct FdBudget {
  int64_t reserve = 0;               // left for everything but connections
  int64_t grpc_max_connections = 0;  // --grpc_max_connections
  int64_t http_max_connections = 0;  // --http_max_connections
};

// A reserve of an eighth of the limit (at least 64 descriptors), the rest
// split evenly between the two doors: under 4096 descriptors (the project's
// deploy/podman/containers.conf) 512 reserved and 1792 connections a door.
// A door that is off leaves its share unused rather than giving it to the
// other: its flag can say otherwise.
FdBudget FdBudgetFor(int64_t fd_limit);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_FD_BUDGET_H_
