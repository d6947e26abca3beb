// Client::Impl: what a Client, its OpChains and its calls in flight share
// (options, channel, stub), and the steps every call takes: request building,
// per-call context (deadline, token, trace), unary calls (client.cc) with
// their resends (retry.cc), streamed calls (stream_call.cc). Private to the
// SDK (not under include/).
//
// Thread-safety: set up once by Client::Create, then only read; every method
// is const or static and safe from many threads at once.
#ifndef TENSOROPS_CLIENT_CLIENT_IMPL_H_
#define TENSOROPS_CLIENT_CLIENT_IMPL_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "client/unary_codec.h"
#include "tensorops/client.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace tensorops {
inline namespace client_v1 {

// A new W3C traceparent: a random trace id and span id, sampled (client.cc).
std::string NewTraceparent();

// `what` prefixes an error: "" for the call's op, "then[i] (Op): " for a
// chain's step.
// With `raw_outside`, a non-STRING tensor's raw_data is left unset: its
// bytes travel as a slice of their own (client/unary_codec.h).
absl::Status EncodeInput(const Tensor& t, absl::string_view what, size_t index, v1::Tensor* proto,
                         bool raw_outside = false);

// A reply's outputs as Tensors (raw bytes moved, not copied).
ExecuteResult DecodeResponse(v1::ExecuteResponse* response);

// One streamed input (stream_call.cc): a Tensor held whole, or a source
// read chunk by chunk. A value.
struct StreamInput {
  const Tensor* tensor = nullptr;
  StreamSource* source = nullptr;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

// A streamed call's progress, shared by its sending and reading threads
// (stream_call.cc).
class ProgressState;

struct Client::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TensorOps::Stub> stub;
  // Execute called raw (grpc::ByteBuffer messages, client/unary_codec.h),
  // so big tensors leave and arrive without protobuf's copies.
  std::string execute_method_name;
  std::unique_ptr<grpc::internal::RpcMethod> execute_method;
  // ExecuteStream called raw (grpc::ByteBuffer messages on the generated
  // stub's method path), so chunks leave and enter tensors without protobuf
  // copies (wire/stream_chunk.h). gRPC keeps a pointer to the name.
  std::string stream_method_name;
  std::unique_ptr<grpc::internal::RpcMethod> stream_method;

  // Whether a unary call that ended `st` on its `attempt`-th try is sent
  // again (after sleeping its backoff): see the definition (retry.cc).
  bool ResendCutAnswer(const absl::Status& st, int attempt, size_t request_bytes,
                       std::chrono::system_clock::time_point deadline) const;
  // True for a call that failed before any server saw it: the pick found
  // no replica whose health watch had answered (retry.cc).
  static bool NeverSent(const absl::Status& st);
  // The same decision without the sleep, for calls that must not block
  // (ExecuteAsync): the backoff to wait before the resend, or nullopt for
  // none.
  std::optional<std::chrono::milliseconds> ResendWait(
      const absl::Status& st, int attempt, size_t request_bytes,
      std::chrono::system_clock::time_point deadline) const;
  // The deadline every attempt of `call` shares; time_point::max() for none.
  std::chrono::system_clock::time_point CallDeadline(const CallOptions& call) const {
    const std::chrono::milliseconds d = call.deadline.value_or(options.default_deadline);
    return d.count() > 0 ? std::chrono::system_clock::now() + d
                         : std::chrono::system_clock::time_point::max();
  }

  // An attempt's context: `deadline` (CallDeadline's, the same for every
  // attempt of a call; time_point::max() for none) and, when configured,
  // the bearer token.
  void SetDeadline(std::chrono::system_clock::time_point deadline, grpc::ClientContext* ctx) const {
    if (deadline != std::chrono::system_clock::time_point::max()) ctx->set_deadline(deadline);
    if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
  }
  // The same for a call of one attempt.
  void SetDeadline(const CallOptions& call, grpc::ClientContext* ctx) const {
    SetDeadline(CallDeadline(call), ctx);
  }

  // The traceparent an Execute sends: the caller's, a new trace's when the
  // caller asked for one, else none ("").
  static std::string Traceparent(const CallOptions& call) {
    if (!call.traceparent.empty()) return call.traceparent;
    return call.new_trace ? NewTraceparent() : std::string();
  }
  // Sends `traceparent` (and the caller's tracestate) with the call; nothing
  // without a traceparent (a tracestate alone means nothing to a server).
  static void AddTrace(const CallOptions& call, const std::string& traceparent,
                       grpc::ClientContext* ctx) {
    if (traceparent.empty()) return;
    ctx->AddMetadata("traceparent", traceparent);
    if (!call.tracestate.empty()) ctx->AddMetadata("tracestate", call.tracestate);
  }
  // Writes what the finished call's metadata says into call.trace, if set.
  static void ReadTrace(const CallOptions& call, const std::string& traceparent,
                        const grpc::ClientContext& ctx) {
    if (call.trace == nullptr) return;
    CallTrace& out = *call.trace;
    out.traceparent = traceparent;
    out.server_traceparent.clear();
    out.server_timing.clear();
    for (const auto& [key, value] : ctx.GetServerInitialMetadata()) {
      if (key == "traceparent") out.server_traceparent.assign(value.data(), value.size());
    }
    // A failed call's traceparent comes in the trailers (it stays
    // Trailers-Only, which gRPC's retries need).
    for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
      if (key == "server-timing") out.server_timing.assign(value.data(), value.size());
      if (key == "traceparent") out.server_traceparent.assign(value.data(), value.size());
    }
  }
  std::string authorization;  // "Bearer <token>" or empty

  absl::Status BuildRequest(absl::string_view op, const Attrs& attrs,
                            const std::vector<Tensor>& inputs, absl::Span<const ChainStep> then,
                            v1::ExecuteRequest* request,
                            std::vector<const Tensor*>* outside = nullptr) const {
    request->set_op(std::string(op));
    FillAttrs(attrs, request->mutable_attrs());
    for (size_t i = 0; i < inputs.size(); ++i) {
      // Big inputs' bytes outside the message (client/unary_codec.h).
      const bool out = outside != nullptr && client_internal::SendsOutside(inputs[i]);
      if (outside != nullptr) outside->push_back(out ? &inputs[i] : nullptr);
      absl::Status st = EncodeInput(inputs[i], "", i, request->add_inputs(), out);
      if (!st.ok()) return st;
    }
    return BuildSteps(then, request->mutable_then());
  }

  // A chain's steps, for ExecuteRequest.then and StreamHeader.then alike
  // (steps' inputs are small and always travel inline).
  static absl::Status BuildSteps(absl::Span<const ChainStep> then,
                                 google::protobuf::RepeatedPtrField<v1::Step>* out) {
    out->Reserve(static_cast<int>(then.size()));
    for (size_t s = 0; s < then.size(); ++s) {
      const ChainStep& step = then[s];
      v1::Step* proto = out->Add();
      proto->set_op(step.op);
      FillAttrs(step.attrs, proto->mutable_attrs());
      const std::string what = absl::StrCat("then[", s, "] (", step.op, "): ");
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        // Numbered in the op's own input order, where the previous output is
        // inputs[0], as the single call's errors are.
        absl::Status st = EncodeInput(step.inputs[i], what, i + 1, proto->add_inputs());
        if (!st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

  static void FillAttrs(const Attrs& attrs, google::protobuf::Struct* out) {
    auto* fields = out->mutable_fields();
    for (const auto& [name, value] : attrs) {
      google::protobuf::Value& v = (*fields)[name];
      switch (value.kind()) {
        case AttrValue::Kind::kNumber:
          v.set_number_value(value.number());
          break;
        case AttrValue::Kind::kString:
          v.set_string_value(value.str());
          break;
        case AttrValue::Kind::kBool:
          v.set_bool_value(value.boolean());
          break;
      }
    }
  }

  // Whether `call` goes through ExecuteStream. Only `inputs` are streamed:
  // a chain's steps travel inline, whatever their size.
  bool UseStream(const std::vector<Tensor>& inputs, const CallOptions& call) const {
    if (call.transport == Transport::kUnary) return false;
    if (call.transport == Transport::kStream) return true;
    int64_t bytes = 0;
    for (const Tensor& t : inputs) {
      if (t.dtype() == DataType::kString) return false;
      bytes += static_cast<int64_t>(t.bytes().size());
    }
    return bytes >= options.stream_threshold_bytes;
  }

  // One ExecuteAsync call: its attempts, their backoffs and its end (client.cc).
  struct AsyncCall;

  // Execute and chains: one Execute message or ExecuteStream, as UseStream says.
  ExecuteResult Call(absl::string_view op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                     absl::Span<const ChainStep> then, const CallOptions& call) const;
  ExecuteResult ExecuteStream(absl::string_view op, const Attrs& attrs,
                              const std::vector<Tensor>& inputs, absl::Span<const ChainStep> then,
                              const CallOptions& call) const;
  // Streamed calls (stream_call.cc).
  // ExecuteStream from inputs (tensors or sources) into `sink` (one output).
  absl::Status Stream(absl::string_view op, const Attrs& attrs,
                      const std::vector<StreamInput>& inputs, absl::Span<const ChainStep> then,
                      const CallOptions& call, StreamSink* sink) const;
  // One ExecuteStream attempt of Stream; *output_started if any output
  // reached the sink (it was then Discarded if the attempt failed).
  absl::Status StreamAttempt(const grpc::ByteBuffer& header_buffer,
                             const std::vector<StreamInput>& inputs, const CallOptions& call,
                             std::chrono::system_clock::time_point deadline,
                             const std::string& traceparent, StreamSink* sink,
                             ProgressState* progress, bool* output_started) const;
  absl::StatusOr<v1::ExecuteStreamRequest> StreamHeader(absl::string_view op, const Attrs& attrs,
                                                        const std::vector<StreamInput>& inputs,
                                                        absl::Span<const ChainStep> then,
                                                        const CallOptions& call) const;
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_CLIENT_IMPL_H_
