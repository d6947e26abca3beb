#include "server/grpc/grpc_metrics.h"

namespace tensorops {
namespace {

// Each gRPC call's span carries its status code under OpenTelemetry's
// gRPC attribute.
constexpr char kCodeAttribute[] = "rpc.grpc.status_code";

CallMethodSpec Unary(const char* name) {
  CallMethodSpec spec;
  spec.name = name;
  spec.bytes = CallBytes::kMessageSizes;  // request and response message sizes
  spec.span_code_attribute = kCodeAttribute;
  return spec;
}

}  // namespace

GrpcMethods GrpcMethods::Register(Metrics* metrics) {
  GrpcMethods m;
  m.execute = metrics->AddMethod(Unary("Execute"));
  CallMethodSpec stream = Unary("ExecuteStream");
  // The tensor bytes of its chunks, not its messages.
  stream.bytes = CallBytes::kStreamBytes;
  stream.log_bytes_in = "received_bytes";
  stream.log_bytes_out = "sent_bytes";
  m.execute_stream = metrics->AddMethod(stream);
  CallMethodSpec list = Unary("ListOps");
  list.bytes = CallBytes::kNone;
  list.per_op = false;
  m.list_ops = metrics->AddMethod(list);
  m.model_infer = metrics->AddMethod(Unary("ModelInfer"));
  m.model_stream_infer = metrics->AddMethod(Unary("ModelStreamInfer"));
  return m;
}

const ConnectionMetrics* RegisterGrpcConnections(Metrics* metrics) {
  ConnectionMetricsSpec spec;
  spec.open_name = "tensorops_grpc_connections";
  spec.open_help =
      "Open connections of the gRPC door's plaintext listeners "
      "(--port, --listen), counted against --grpc_max_connections.";
  spec.closed_name = "tensorops_grpc_connections_refused_total";
  spec.closed_help =
      "gRPC connections closed as soon as they were accepted, by reason: "
      "cap (--grpc_max_connections reached), emfile (the process was out "
      "of file descriptors).";
  // Indexed by ConnectionRefusal.
  spec.reasons = {"cap", "emfile"};
  static_assert(static_cast<int>(ConnectionRefusal::kCap) == 0);
  static_assert(static_cast<int>(ConnectionRefusal::kEmfile) == 1);
  return metrics->AddConnections(spec);
}

}  // namespace tensorops
