#include "server/grpc/grpc_metrics.h"

#include "absl/strings/str_cat.h"

namespace tensorops {
namespace {

// Whether a gRPC server span failed, as OpenTelemetry's RPC conventions say:
// the codes that are the server's fault (a caller's INVALID_ARGUMENT is not).
bool GrpcServerFailed(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

// A gRPC method's span per OpenTelemetry's RPC conventions: named
// "<package.Service>/<Method>", with rpc.system, rpc.service, rpc.method and
// the status code's number under rpc.grpc.status_code.
SpanConvention GrpcSpan(const char* service, const char* method) {
  SpanConvention span;
  span.name = absl::StrCat(service, "/", method);
  span.attributes = {{"rpc.system", "grpc"}, {"rpc.service", service}, {"rpc.method", method}};
  span.code_attribute = "rpc.grpc.status_code";
  span.failed = GrpcServerFailed;
  return span;
}

constexpr char kTensorOps[] = "tensorops.v1.TensorOps";
constexpr char kInference[] = "inference.GRPCInferenceService";

CallMethodSpec Unary(const char* service, const char* name) {
  CallMethodSpec spec;
  spec.name = name;
  spec.bytes = CallBytes::kMessageSizes;  // request and response message sizes
  spec.span = GrpcSpan(service, name);
  return spec;
}

}  // namespace

GrpcMethods GrpcMethods::Register(Metrics* metrics) {
  GrpcMethods m;
  m.execute = metrics->AddMethod(Unary(kTensorOps, "Execute"));
  CallMethodSpec stream = Unary(kTensorOps, "ExecuteStream");
  // The tensor bytes of its chunks, not its messages.
  stream.bytes = CallBytes::kStreamBytes;
  stream.log_bytes_in = "received_bytes";
  stream.log_bytes_out = "sent_bytes";
  m.execute_stream = metrics->AddMethod(stream);
  CallMethodSpec list = Unary(kTensorOps, "ListOps");
  list.bytes = CallBytes::kNone;
  list.per_op = false;
  m.list_ops = metrics->AddMethod(list);
  m.model_infer = metrics->AddMethod(Unary(kInference, "ModelInfer"));
  m.model_stream_infer = metrics->AddMethod(Unary(kInference, "ModelStreamInfer"));
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
