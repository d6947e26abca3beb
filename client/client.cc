// tensorops::Client (tensorops/client.h): creating the channel, unary calls
// (Execute, typed calls, chains, ExecuteAsync), ListOps, Health and error
// details. Streamed calls are in stream_call.cc, retries and resends in
// retry.cc, sources and sinks in stream_io.cc.
#include "tensorops/client.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/client_callback.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/balancing.h"
#include "client/client_impl.h"
#include "client/retry.h"
#include "client/tensor_access.h"
#include "client/wire_codec.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "kernels/huge_pages.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "wire/limits.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

// The public header spells the server's defaults as literals (it includes
// no internal header): keep them equal to the one definition.
static_assert(ClientOptions::kDefaultMessageBytes == kDefaultMaxMessageBytes);

// The SDK's DataType is numbered like the wire's, so conversion is a cast.
#define TENSOROPS_SAME_DTYPE_(sdk, wire) \
  static_assert(static_cast<int>(DataType::sdk) == v1::wire, #sdk)
TENSOROPS_SAME_DTYPE_(kInvalid, DATA_TYPE_UNSPECIFIED);
TENSOROPS_SAME_DTYPE_(kFloat32, DATA_TYPE_FLOAT32);
TENSOROPS_SAME_DTYPE_(kFloat64, DATA_TYPE_FLOAT64);
TENSOROPS_SAME_DTYPE_(kFloat16, DATA_TYPE_FLOAT16);
TENSOROPS_SAME_DTYPE_(kBFloat16, DATA_TYPE_BFLOAT16);
TENSOROPS_SAME_DTYPE_(kInt8, DATA_TYPE_INT8);
TENSOROPS_SAME_DTYPE_(kInt16, DATA_TYPE_INT16);
TENSOROPS_SAME_DTYPE_(kInt32, DATA_TYPE_INT32);
TENSOROPS_SAME_DTYPE_(kInt64, DATA_TYPE_INT64);
TENSOROPS_SAME_DTYPE_(kUInt8, DATA_TYPE_UINT8);
TENSOROPS_SAME_DTYPE_(kUInt16, DATA_TYPE_UINT16);
TENSOROPS_SAME_DTYPE_(kUInt32, DATA_TYPE_UINT32);
TENSOROPS_SAME_DTYPE_(kUInt64, DATA_TYPE_UINT64);
TENSOROPS_SAME_DTYPE_(kBool, DATA_TYPE_BOOL);
TENSOROPS_SAME_DTYPE_(kString, DATA_TYPE_STRING);
TENSOROPS_SAME_DTYPE_(kComplex64, DATA_TYPE_COMPLEX64);
TENSOROPS_SAME_DTYPE_(kComplex128, DATA_TYPE_COMPLEX128);
TENSOROPS_SAME_DTYPE_(kFloat8E4M3, DATA_TYPE_FLOAT8_E4M3);
TENSOROPS_SAME_DTYPE_(kFloat8E5M2, DATA_TYPE_FLOAT8_E5M2);
#undef TENSOROPS_SAME_DTYPE_

absl::StatusOr<Tensor> DecodeOutput(v1::Tensor* proto, size_t index) {
  absl::Status st = client_internal::NormalizeToRaw(proto, absl::StrCat("outputs[", index, "]"));
  if (!st.ok()) {
    return absl::InternalError(absl::StrCat("malformed reply from server: ", st.message()));
  }
  std::vector<int64_t> shape(proto->shape().begin(), proto->shape().end());
  const auto dtype = static_cast<DataType>(proto->dtype());
  if (dtype == DataType::kString) {
    std::vector<std::string> strings;
    strings.reserve(proto->string_data_size());
    for (std::string& s : *proto->mutable_string_data()) strings.push_back(std::move(s));
    return Tensor(std::move(strings), std::move(shape));
  }
  std::string bytes = std::move(*proto->mutable_raw_data());
  return TensorAccess::FromRaw(dtype, std::move(shape), std::move(bytes));
}

absl::StatusOr<Tensor> SingleOutput(ExecuteResult result) {
  if (!result.ok()) return result.status();
  if (result->size() != 1) {
    return absl::InternalError(
        absl::StrCat("server returned ", result->size(), " outputs, expected 1"));
  }
  return std::move(result->front());
}

}  // namespace

// A new W3C traceparent: a random trace id and span id (never all zeros),
// sampled. From a per-thread generator seeded by the OS: ids must be
// unique, not secret.
std::string NewTraceparent() {
  thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }());
  uint64_t words[3] = {0, 0, 0};
  while (words[0] == 0 && words[1] == 0) {
    words[0] = rng();
    words[1] = rng();
  }
  while (words[2] == 0) words[2] = rng();
  return absl::StrFormat("00-%016x%016x-%016x-01", words[0], words[1], words[2]);
}

// `what` prefixes an error: "" for the call's op, "then[i] (Op): " for a
// chain's step.
absl::Status EncodeInput(const Tensor& t, absl::string_view what, size_t index, v1::Tensor* proto,
                         bool raw_outside) {
  absl::Status valid = t.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, "inputs[", index, "]: ", valid.message()));
  }
  proto->set_dtype(static_cast<v1::DataType>(t.dtype()));
  for (int64_t d : t.shape()) proto->add_shape(d);
  if (t.dtype() == DataType::kString) {
    for (const std::string& s : t.strings()) proto->add_string_data(s);
  } else if (!raw_outside) {
    proto->set_raw_data(t.bytes().data(), t.bytes().size());
  }
  return absl::OkStatus();
}

ExecuteResult DecodeResponse(v1::ExecuteResponse* response) {
  std::vector<Tensor> outputs;
  outputs.reserve(response->outputs_size());
  for (int i = 0; i < response->outputs_size(); ++i) {
    absl::StatusOr<Tensor> t = DecodeOutput(response->mutable_outputs(i), i);
    if (!t.ok()) return t.status();
    outputs.push_back(*std::move(t));
  }
  return outputs;
}

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

bool TuneMallocForBigTensors() { return TuneMallocForBigBuffers(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("ClientOptions.target is empty");
  if (options.max_send_message_bytes <= 0 || options.max_send_message_bytes > INT32_MAX ||
      options.max_receive_message_bytes <= 0 || options.max_receive_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(
        "ClientOptions max message sizes must be in [1, 2147483647] bytes");
  }
  if (options.retry.enabled &&
      (options.retry.max_attempts < 2 || options.retry.initial_backoff.count() <= 0 ||
       options.retry.max_backoff.count() <= 0 || options.retry.backoff_multiplier <= 0)) {
    return absl::InvalidArgumentError(
        "ClientOptions.retry: max_attempts must be >= 2 and backoffs > 0 (or set enabled = false)");
  }
  if (options.tls.has_value() &&
      options.tls->client_cert_chain.empty() != options.tls->client_private_key.empty()) {
    return absl::InvalidArgumentError(
        "ClientOptions.tls: client_cert_chain and client_private_key go together");
  }
  if (options.stream_threshold_bytes < 0 || options.stream_chunk_bytes < 1 ||
      options.stream_chunk_bytes > options.max_send_message_bytes - kStreamFramingReserveBytes) {
    return absl::InvalidArgumentError(
        "ClientOptions: stream_threshold_bytes must be >= 0 and stream_chunk_bytes between 1 "
        "and max_send_message_bytes minus 64 KiB");
  }
  if (options.bearer_token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError("ClientOptions.bearer_token must be one line");
  }
  if (absl::Status st = CheckBalancingOptions(options); !st.ok()) return st;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  if (options.tls.has_value()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls->root_certs;
    ssl.pem_cert_chain = options.tls->client_cert_chain;
    ssl.pem_private_key = options.tls->client_private_key;
    creds = grpc::SslCredentials(ssl);
    if (!options.tls->server_name_override.empty()) {
      args.SetSslTargetNameOverride(options.tls->server_name_override);
    }
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  args.SetMaxSendMessageSize(static_cast<int>(options.max_send_message_bytes));
  args.SetMaxReceiveMessageSize(static_cast<int>(options.max_receive_message_bytes));
  args.SetServiceConfigJSON(ServiceConfigJson(options));
  SetBalancingArgs(options, &args);
  // Our service config, not one from DNS TXT records.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  // Kept on without a retry policy too: gRPC's transparent retries resend
  // only calls no server saw (a load balancer's REFUSED_STREAM at a
  // replica's kill -9 ended 8 of 22,236 calls UNAVAILABLE with them off).
  // The retry buffer holds a call's messages until it commits: a call over
  // it cannot be resent, not even transparently, so it is set with retries
  // off too (gRPC's default, 256 KiB, left 1-4 MiB calls refused by the
  // balancer unsent).
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE,
              static_cast<int>(std::min<int64_t>(options.retry.max_buffered_bytes, INT32_MAX)));
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  if (!options.bearer_token.empty()) impl->authorization = "Bearer " + options.bearer_token;
  impl->channel = grpc::CreateCustomChannel(options.target, creds, args);
  if (impl->channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to ", options.target));
  }
  impl->stub = v1::TensorOps::NewStub(impl->channel);
  impl->execute_method_name = absl::StrCat("/", v1::TensorOps::service_full_name(), "/Execute");
  impl->execute_method = std::make_unique<grpc::internal::RpcMethod>(
      impl->execute_method_name.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, impl->channel);
  impl->stream_method_name =
      absl::StrCat("/", v1::TensorOps::service_full_name(), "/ExecuteStream");
  impl->stream_method = std::make_unique<grpc::internal::RpcMethod>(
      impl->stream_method_name.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, impl->channel);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

ExecuteResult Client::Impl::Call(absl::string_view op, const Attrs& attrs,
                                 const std::vector<Tensor>& inputs,
                                 absl::Span<const ChainStep> then, const CallOptions& call) const {
  if (UseStream(inputs, call)) return ExecuteStream(op, attrs, inputs, then, call);
  v1::ExecuteRequest request;
  std::vector<const Tensor*> outside;
  absl::Status st = BuildRequest(op, attrs, inputs, then, &request, &outside);
  if (!st.ok()) return st;
  // The bytes the stub would send, big inputs from their own buffers; sent
  // again as they are by a retry.
  const grpc::ByteBuffer body = client_internal::EncodeExecuteRequest(&request, outside);
  // One deadline for every attempt.
  const auto deadline = CallDeadline(call);
  grpc::ByteBuffer reply;
  // One trace for every attempt.
  const std::string traceparent = Traceparent(call);
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext ctx;
    SetDeadline(deadline, &ctx);
    AddTrace(call, traceparent, &ctx);
    reply.Clear();
    st = FromGrpcStatus(grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), *execute_method, &ctx, body, &reply));
    ReadTrace(call, traceparent, ctx);
    if (st.ok() || !ResendCutAnswer(st, attempt, body.Length(), deadline)) break;
  }
  if (!st.ok()) return st;
  v1::ExecuteResponse response;
  st = client_internal::DecodeExecuteReply(&reply, &response);
  if (!st.ok()) return st;
  return DecodeResponse(&response);
}

ExecuteResult Client::Execute(absl::string_view op, const Attrs& attrs,
                              const std::vector<Tensor>& inputs, const CallOptions& call) const {
  return impl_->Call(op, attrs, inputs, {}, call);
}

// Everything the call needs lives here until gRPC runs the last attempt's
// completion, including a reference to the channel and stub. Its attempts
// come one after another (each starts from the previous one's completion
// or from the alarm that waits its backoff), so no two threads touch it
// at once.
struct Client::Impl::AsyncCall {
  std::shared_ptr<Impl> impl;
  std::unique_ptr<grpc::ClientContext> ctx;  // a new one per attempt
  grpc::ByteBuffer body;   // the request's bytes (client/unary_codec.h), resent as they are
  grpc::ByteBuffer reply;  // this attempt's
  ExecuteCallback done;
  std::string traceparent;                         // one trace for every attempt
  CallOptions call;                                // its deadline and trace settings
  std::chrono::system_clock::time_point deadline;  // one for every attempt
  int attempt = 0;
  std::unique_ptr<grpc::Alarm> backoff;  // the wait before a resend

  static void Attempt(AsyncCall* c) {
    ++c->attempt;
    c->ctx = std::make_unique<grpc::ClientContext>();
    c->impl->SetDeadline(c->deadline, c->ctx.get());
    Impl::AddTrace(c->call, c->traceparent, c->ctx.get());
    c->reply.Clear();
    grpc::internal::CallbackUnaryCall(c->impl->channel.get(), *c->impl->execute_method,
                                      c->ctx.get(), &c->body, &c->reply,
                                      [c](grpc::Status status) { Done(c, status); });
  }
  // A cut answer is resent as the sync call resends it (ResendWait), after
  // its backoff on a gRPC alarm: no thread sleeps.
  static void Done(AsyncCall* c, const grpc::Status& status) {
    Impl::ReadTrace(c->call, c->traceparent, *c->ctx);
    absl::Status st = FromGrpcStatus(status);
    if (!st.ok()) {
      const std::optional<std::chrono::milliseconds> wait =
          c->impl->ResendWait(st, c->attempt, c->body.Length(), c->deadline);
      if (wait.has_value()) {
        c->backoff = std::make_unique<grpc::Alarm>();
        c->backoff->Set(std::chrono::system_clock::now() + *wait, [c](bool) { Attempt(c); });
        return;
      }
    }
    std::unique_ptr<AsyncCall> owned(c);
    // The call may hold the last reference to the channel (the Client was
    // destroyed while it ran). A channel must not be destroyed on the thread
    // running its own callback (gRPC then frees its callback queue twice), so
    // keep the reference here and, if it is the last, drop it on another thread.
    std::shared_ptr<Impl> impl = std::move(owned->impl);
    ExecuteCallback cb = std::move(owned->done);
    if (!st.ok()) {
      owned.reset();
      cb(st);
    } else {
      v1::ExecuteResponse response;
      absl::Status decoded = client_internal::DecodeExecuteReply(&owned->reply, &response);
      owned.reset();
      cb(decoded.ok() ? DecodeResponse(&response) : ExecuteResult(decoded));
    }
    if (impl.use_count() == 1) {
      std::thread([last = std::move(impl)]() mutable { last.reset(); }).detach();
    }
  }
};

void Client::ExecuteAsync(absl::string_view op, const Attrs& attrs,
                          const std::vector<Tensor>& inputs, ExecuteCallback done,
                          const CallOptions& call) const {
  auto* c = new Impl::AsyncCall;
  c->impl = impl_;
  c->done = std::move(done);
  c->traceparent = Impl::Traceparent(call);
  c->call.deadline = call.deadline;
  c->call.tracestate = call.tracestate;
  c->call.trace = call.trace;
  c->deadline = impl_->CallDeadline(call);
  v1::ExecuteRequest request;
  std::vector<const Tensor*> outside;
  absl::Status st = impl_->BuildRequest(op, attrs, inputs, {}, &request, &outside);
  if (!st.ok()) {
    ExecuteCallback cb = std::move(c->done);
    delete c;
    cb(st);
    return;
  }
  c->body = client_internal::EncodeExecuteRequest(&request, outside);
  Impl::AsyncCall::Attempt(c);
}

std::future<ExecuteResult> Client::ExecuteFuture(absl::string_view op, const Attrs& attrs,
                                                 const std::vector<Tensor>& inputs,
                                                 const CallOptions& call) const {
  auto promise = std::make_shared<std::promise<ExecuteResult>>();
  std::future<ExecuteResult> future = promise->get_future();
  ExecuteAsync(
      op, attrs, inputs, [promise](ExecuteResult result) { promise->set_value(std::move(result)); },
      call);
  return future;
}

// Each typed call is a chain of one op: the op's name, attributes and input
// order are spelled once, in OpChain's typed steps.
absl::StatusOr<Tensor> Client::Reverse(const Tensor& data, const Tensor& axes, ReverseMode mode,
                                       const CallOptions& call) const {
  return Chain(data).Reverse(axes, mode).Run(call);
}

absl::StatusOr<Tensor> Client::ReverseSequence(const Tensor& data, const Tensor& seq_lengths,
                                               int64_t batch_axis, int64_t seq_axis,
                                               const CallOptions& call) const {
  return Chain(data).ReverseSequence(seq_lengths, batch_axis, seq_axis).Run(call);
}

absl::StatusOr<Tensor> Client::Roll(const Tensor& data, const Tensor& shift, const Tensor& axes,
                                    const CallOptions& call) const {
  return Chain(data).Roll(shift, axes).Run(call);
}

absl::StatusOr<Tensor> Client::OnnxReverseSequence(const Tensor& input, const Tensor& sequence_lens,
                                                   int64_t batch_axis, int64_t time_axis,
                                                   const CallOptions& call) const {
  return Chain(input).OnnxReverseSequence(sequence_lens, batch_axis, time_axis).Run(call);
}

OpChain Client::Chain(Tensor data) const { return OpChain(impl_, std::move(data)); }

OpChain::OpChain(std::shared_ptr<const Client::Impl> impl, Tensor data)
    : impl_(std::move(impl)), data_(std::move(data)) {}

OpChain& OpChain::Then(absl::string_view op, Attrs attrs, std::vector<Tensor> inputs) {
  return Then(ChainStep{std::string(op), std::move(attrs), std::move(inputs)});
}

OpChain& OpChain::Then(ChainStep step) {
  ops_.push_back(std::move(step));
  return *this;
}

OpChain& OpChain::Reverse(const Tensor& axes, ReverseMode mode) {
  return Then("Reverse", {{"mode", mode == ReverseMode::kMask ? "mask" : "index"}}, {axes});
}

OpChain& OpChain::ReverseSequence(const Tensor& seq_lengths, int64_t batch_axis, int64_t seq_axis) {
  return Then("ReverseSequence", {{"batch_axis", batch_axis}, {"seq_axis", seq_axis}},
              {seq_lengths});
}

OpChain& OpChain::Roll(const Tensor& shift, const Tensor& axes) {
  return Then("Roll", {}, {shift, axes});
}

OpChain& OpChain::OnnxReverseSequence(const Tensor& sequence_lens, int64_t batch_axis,
                                      int64_t time_axis) {
  return Then("onnx.ReverseSequence", {{"batch_axis", batch_axis}, {"time_axis", time_axis}},
              {sequence_lens});
}

ExecuteResult OpChain::RunAll(const CallOptions& call) const {
  if (ops_.empty()) {
    return absl::InvalidArgumentError(
        "the chain has no op: append one (e.g. .Roll(shift, axes)) before Run");
  }
  const ChainStep& first = ops_.front();
  std::vector<Tensor> inputs;
  inputs.reserve(1 + first.inputs.size());
  inputs.push_back(data_);
  inputs.insert(inputs.end(), first.inputs.begin(), first.inputs.end());
  return impl_->Call(first.op, first.attrs, inputs, absl::MakeConstSpan(ops_).subspan(1), call);
}

absl::StatusOr<Tensor> OpChain::Run(const CallOptions& call) const {
  return SingleOutput(RunAll(call));
}

absl::StatusOr<std::vector<OpInfo>> Client::ListOps(const CallOptions& call) const {
  grpc::ClientContext ctx;
  impl_->SetDeadline(call, &ctx);
  v1::ListOpsResponse response;
  absl::Status st = FromGrpcStatus(impl_->stub->ListOps(&ctx, v1::ListOpsRequest(), &response));
  if (!st.ok()) return st;
  std::vector<OpInfo> ops;
  for (const v1::OpInfo& p : response.ops()) {
    OpInfo op;
    op.name = p.name();
    op.aliases.assign(p.aliases().begin(), p.aliases().end());
    op.description = p.description();
    for (const v1::InputInfo& in : p.inputs()) {
      OpInputInfo i{in.name(), in.description(), {}, in.min_rank(), in.max_rank()};
      for (int t : in.allowed_types()) i.allowed_types.push_back(static_cast<DataType>(t));
      op.inputs.push_back(std::move(i));
    }
    for (const v1::AttributeInfo& a : p.attributes()) {
      op.attributes.push_back(
          {a.name(), a.type(), a.description(), a.required(), a.default_value(), a.range()});
    }
    for (const v1::OutputInfo& o : p.outputs()) op.outputs.push_back({o.name(), o.description()});
    ops.push_back(std::move(op));
  }
  return ops;
}

absl::StatusOr<ServingStatus> Client::Health(absl::string_view service,
                                             const CallOptions& call) const {
  // health.proto is compiled without stubs; call the method by name.
  static const char kMethod[] = "/grpc.health.v1.Health/Check";
  const grpc::internal::RpcMethod method(kMethod, grpc::internal::RpcMethod::NORMAL_RPC,
                                         impl_->channel);
  grpc::ClientContext ctx;
  impl_->SetDeadline(call, &ctx);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  grpc::health::v1::HealthCheckResponse response;
  absl::Status st = FromGrpcStatus(
      grpc::internal::BlockingUnaryCall<grpc::protobuf::MessageLite, grpc::protobuf::MessageLite>(
          impl_->channel.get(), method, &ctx, request, &response));
  if (!st.ok()) return st;
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN:
      return ServingStatus::kServiceUnknown;
    default:
      return ServingStatus::kUnknown;
  }
}

ErrorDetails GetErrorDetails(const absl::Status& status) {
  ErrorDetails out;
  status.ForEachPayload([&out](absl::string_view url, const absl::Cord& bytes) {
    if (!absl::StartsWith(url, "type.googleapis.com/")) return;
    out.type_urls.emplace_back(url);
    const std::string value(bytes);
    if (url == "type.googleapis.com/google.rpc.RetryInfo") {
      google::rpc::RetryInfo info;
      if (!info.ParseFromString(value)) return;
      out.retry_delay = std::chrono::milliseconds(info.retry_delay().seconds() * 1000 +
                                                  info.retry_delay().nanos() / 1000000);
    } else if (url == "type.googleapis.com/google.rpc.ErrorInfo") {
      google::rpc::ErrorInfo info;
      if (!info.ParseFromString(value)) return;
      out.reason = info.reason();
      out.domain = info.domain();
      out.metadata.insert(info.metadata().begin(), info.metadata().end());
    } else if (url == "type.googleapis.com/google.rpc.BadRequest") {
      google::rpc::BadRequest bad;
      if (!bad.ParseFromString(value)) return;
      for (const auto& v : bad.field_violations()) {
        out.field_violations.push_back({v.field(), v.description()});
      }
    }
  });
  return out;
}

absl::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    default:
      return "UNKNOWN";
  }
}

}  // namespace client_v1
}  // namespace tensorops
