// The gRPC door's rows in the server's metrics (server/core/metrics.h),
// which the door registers itself at start: core/ names no door. Its call
// methods (tensorops.v1's Execute, ExecuteStream and ListOps, the Open
// Inference Protocol's ModelInfer and ModelStreamInfer) and its plaintext
// listeners' connections. The names are the `method` and metric names on
// /metrics (docs/metrics.md).
//
// Thread-safety: the handles are immutable; registering is Metrics's
// (safe from any thread).
#ifndef TENSOROPS_SERVER_GRPC_GRPC_METRICS_H_
#define TENSOROPS_SERVER_GRPC_GRPC_METRICS_H_

#include "server/core/metrics.h"

namespace tensorops {

// The gRPC door's call methods, registered (Metrics::AddMethod: the same
// handles however often).
struct GrpcMethods {
  const CallMethod* execute = nullptr;
  const CallMethod* execute_stream = nullptr;
  const CallMethod* list_ops = nullptr;  // names no op (op="none")
  const CallMethod* model_infer = nullptr;
  const CallMethod* model_stream_infer = nullptr;  // one call per request message

  static GrpcMethods Register(Metrics* metrics);
};

// Why the plaintext listener (grpc_listener.h) closed a connection as soon
// as it was accepted: the `reason` of tensorops_grpc_connections_refused_total.
enum class ConnectionRefusal {
  kCap,     // --grpc_max_connections reached
  kEmfile,  // out of file descriptors (EMFILE/ENFILE)
};

// tensorops_grpc_connections and tensorops_grpc_connections_refused_total
// (ConnectionRefusal), registered.
const ConnectionMetrics* RegisterGrpcConnections(Metrics* metrics);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_GRPC_METRICS_H_
