// tensorops::Client: calls a tensorops server (tensorops.v1.TensorOps) over gRPC.
//
//   tensorops::ClientOptions options;
//   options.target = "127.0.0.1:50051";
//   auto client = tensorops::Client::Create(options);
//   if (!client.ok()) return client.status();
//   absl::StatusOr<tensorops::Tensor> out = (*client)->Roll(data, shift, axes);
//
// Every call returns absl::StatusOr with the server's status code and message
// unchanged (e.g. INVALID_ARGUMENT "Roll: axes[0] = 2 is out of range ...").
// Errors found before sending (an invalid Tensor) are INVALID_ARGUMENT too.
// Tensors travel as packed little-endian raw_data (STRING as string_data).
// Inputs of ClientOptions::stream_threshold_bytes (64 MiB) or more are
// streamed in chunks (ExecuteStream), so the typed calls and Execute take
// tensors of any size, also past protobuf's 2 GiB message limit; a corrupt
// transfer fails with DATA_LOSS.
//
// Several ops in one call (a chain: one round trip, one transfer, one pass
// over memory on the server where it can), see OpChain:
//
//   absl::StatusOr<tensorops::Tensor> out =
//       (*client)->Chain(data).Reverse({0}).Roll({1}, {1}).Run();
//
// Thread-safety: a Client is safe to use from many threads at once; one
// Client per target is enough (it multiplexes calls over its connections).
// Not copyable.
#ifndef TENSOROPS_CLIENT_CLIENT_H_
#define TENSOROPS_CLIENT_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensorops/export.h"
#include "tensorops/tensor.h"

namespace tensorops {
inline namespace client_v1 {

// TLS settings. All fields are PEM text; empty ones use gRPC's defaults
// (system roots; no client certificate).
struct TlsOptions {
  std::string root_certs;
  std::string client_cert_chain;  // set together with client_private_key (mTLS)
  std::string client_private_key;
  std::string server_name_override;  // for tests: the name to check in the server cert
};

// Retries of calls that fail with UNAVAILABLE (server stopping, connection
// refused) or RESOURCE_EXHAUSTED (a server's queue or in-flight budget
// full), by gRPC's retry machinery (service config retryPolicy), and of
// unary calls that fail UNKNOWN by the SDK itself: no status at all, an
// answer cut after it began (a replica killed while it sent it, which
// HAProxy 2.6 passes on as "Stream removed"; tensorops servers never answer
// UNKNOWN themselves), which gRPC's retries, ending at an answer's first
// byte, cannot resend. Every op is a pure function of its request, so a
// retry is always safe. A server's
// own refusal says when to come back (google.rpc.RetryInfo, and gRPC's
// grpc-retry-pushback-ms trailer with the same delay, which replaces the
// backoff below for that attempt) or that no retry can help (a tensor over a
// limit: pushback -1, the call fails at once); see the error details table
// in docs/reliability.md. With enabled = false there is no retry policy, but
// gRPC still resends, at once and transparently, a call that no server ever
// saw (a stream a proxy refused with REFUSED_STREAM before passing it on),
// as every gRPC client does by default, for calls up to max_buffered_bytes.
struct RetryPolicy {
  bool enabled = true;
  int max_attempts = 5;  // gRPC caps this at 5
  std::chrono::milliseconds initial_backoff{50};
  std::chrono::milliseconds max_backoff{1000};
  double backoff_multiplier = 2.0;
  // Requests larger than this are sent once, not buffered for a retry (nor
  // for a transparent resend, whether or not `enabled`).
  int64_t max_buffered_bytes = 16 << 20;
};

struct ClientOptions {
  // A gRPC target: "host:port", "dns:///name:port", or a list of addresses
  // such as "ipv4:127.0.0.1:5001,127.0.0.1:5002".
  std::string target = "127.0.0.1:50051";
  // Unset: plaintext (insecure). Set: TLS with these settings.
  std::optional<TlsOptions> tls;
  // Non-empty: sent as "authorization: Bearer <bearer_token>" metadata on
  // every call (for servers started with --auth_token_file). Use it with TLS:
  // over plaintext anyone on the path can read it.
  std::string bearer_token;
  // Deadline of each call that does not set its own; zero means none.
  std::chrono::milliseconds default_deadline{std::chrono::seconds(60)};
  // Largest message sent or received; the server's default (272 MiB) fits a
  // 256 MiB tensor.
  static constexpr int64_t kDefaultMessageBytes = int64_t{272} << 20;
  int64_t max_send_message_bytes = kDefaultMessageBytes;
  int64_t max_receive_message_bytes = kDefaultMessageBytes;
  RetryPolicy retry;
  // gRPC load-balancing policy: "round_robin" spreads calls over every
  // address of the target; "pick_first" uses one connection.
  std::string load_balancing_policy = "round_robin";
  // Client-side health checking (gRPC's own, a grpc.health.v1 Watch on each
  // connection): with round_robin, a replica whose status for this service
  // is not SERVING (a draining server turns NOT_SERVING before it refuses
  // calls) gets no new calls until it is SERVING again. A server without the
  // health service counts as healthy. Empty: off. pick_first ignores it.
  std::string health_check_service = "tensorops.v1.TensorOps";
  // A replica that went away (restarted, killed) is reconnected with gRPC's
  // backoff (1 s, x1.6, +-20% jitter) capped here (gRPC's own cap is 120 s:
  // a replica back after a minute could wait two more for calls).
  std::chrono::milliseconds max_reconnect_backoff{std::chrono::seconds(2)};
  // A lost connection makes the channel resolve its target again (a dns:///
  // name: replicas' new addresses); at most this often (gRPC's default: 30 s).
  std::chrono::milliseconds min_time_between_resolutions{std::chrono::seconds(1)};
  // Calls whose inputs hold at least this many bytes go through the
  // streaming RPC (ExecuteStream: tensors in chunks, no message size limit,
  // CRC-32 checked both ways) instead of one Execute message; 0 streams
  // every call. Calls with STRING inputs always use Execute.
  int64_t stream_threshold_bytes = int64_t{64} << 20;
  // Chunk size of streamed inputs; at most the server's --stream_chunk_bytes
  // (1 MiB by default).
  int64_t stream_chunk_bytes = int64_t{1} << 20;
};

// Bytes moved so far by a streamed call (see CallOptions::progress).
struct TransferProgress {
  int64_t bytes_sent = 0;        // input tensor bytes sent
  int64_t bytes_to_send = 0;     // all input tensor bytes
  int64_t bytes_received = 0;    // output tensor bytes received
  int64_t bytes_to_receive = 0;  // all output bytes; 0 until the server has run the op
  // All output bytes as the op's output inference gives them, from the start:
  // for the ops built into the SDK; 0 for any other op.
  int64_t expected_bytes_to_receive = 0;
};
using ProgressCallback = std::function<void(const TransferProgress&)>;

// How a call travels.
enum class Transport {
  kAuto,    // ExecuteStream from ClientOptions::stream_threshold_bytes, else Execute
  kUnary,   // always one Execute message
  kStream,  // always ExecuteStream (not for STRING inputs)
};

// What a call's trace says (W3C Trace Context, Server-Timing): see
// CallOptions::trace.
struct CallTrace {
  // The traceparent the SDK sent: CallOptions::traceparent, or the one it
  // made for CallOptions::new_trace ("00-<new trace id>-<new span id>-01");
  // "" when it sent none.
  std::string traceparent;
  // The server's traceparent for its span of the call (same trace id, the
  // server's span id); "" when none came (an older server, or the call
  // failed before the server saw it).
  std::string server_traceparent;
  // What the server spent where, in ms, the stages of its Prometheus
  // histograms: "queue;dur=0.012, kernel;dur=2.310, total;dur=2.501"
  // (Server-Timing syntax); "" when none came.
  std::string server_timing;
};

// Per-call settings.
struct CallOptions {
  // Overrides ClientOptions::default_deadline; zero means no deadline. For a
  // streamed call it covers the whole transfer.
  std::optional<std::chrono::milliseconds> deadline;
  Transport transport = Transport::kAuto;
  // Streamed calls only: called on the calling thread after every chunk sent
  // or received (about once per stream_chunk_bytes); must be quick.
  ProgressCallback progress;
  // W3C trace context of an Execute (and the typed calls, chains, streamed
  // and async calls): the caller's own "traceparent" (and "tracestate") to
  // continue its trace, sent as is (a malformed one is ignored by the
  // server, which then starts a trace of its own).
  std::string traceparent;
  std::string tracestate;
  // With no `traceparent`: true starts a new trace for the call (a random
  // trace id and span id, sampled: "-01"), sent with `tracestate` if set and
  // reported in trace->traceparent. false (the default): the SDK sends no
  // trace context at all, so an untraced caller's calls leave no span
  // whose parent was never recorded.
  bool new_trace = false;
  // Not null: the SDK writes the call's CallTrace there before the call
  // returns (for ExecuteAsync, before `done` runs). Must outlive the call.
  CallTrace* trace = nullptr;
  // Streamed calls only: the output flows (StreamHeader.flow): the server
  // sends output chunks while the input still arrives, in any order, each
  // placed at its offset as it comes, and holds only its window
  // (--stream_window_bytes) whatever the tensor's size. false: the server
  // keeps the whole input, runs the op, then sends the output in order (a
  // server from before flowing streams ignores the flag and does this).
  bool flow = true;
};

// A streamed call's data input read piece by piece instead of held whole
// (Client::ExecuteStreamed): a tensor bigger than the client's memory. Its
// bytes are read twice, once for the CRC-32 the header carries and once to
// send them.
//
// Thread-safety: called from one thread at a time.
class TENSOROPS_EXPORT StreamSource {
 public:
  virtual ~StreamSource() = default;
  virtual DataType dtype() const = 0;
  virtual std::vector<int64_t> shape() const = 0;
  // Fills out[0, n) with the tensor's bytes [offset, offset + n) (raw_data
  // layout); the calls cover the tensor in order, chunk by chunk.
  virtual absl::Status Read(int64_t offset, int64_t n, char* out) = 0;
};

// Where a streamed call's output goes instead of a Tensor
// (Client::ExecuteStreamed): a flowing output arrives in pieces at any
// offset, each byte once.
//
// Thread-safety: called from one thread at a time (not the calling thread).
class TENSOROPS_EXPORT StreamSink {
 public:
  virtual ~StreamSink() = default;
  // First, once the output's type and shape are known: `bytes` in all.
  virtual absl::Status Start(DataType dtype, const std::vector<int64_t>& shape, int64_t bytes) = 0;
  // Bytes [offset, offset + data.size()) of the output.
  virtual absl::Status Write(int64_t offset, absl::string_view data) = 0;
  // Every byte was written and checked (CRC-32 per chunk and in all).
  virtual absl::Status Finish() { return absl::OkStatus(); }
  // The call failed after Start: what was written is void and must go.
  virtual void Discard() = 0;
};

// A raw file of a tensor's bytes from `offset` on (e.g. a .npy file's data
// after its header), read with pread: constant memory.
TENSOROPS_EXPORT absl::StatusOr<std::unique_ptr<StreamSource>> FileSource(
    const std::string& path, int64_t offset, DataType dtype, std::vector<int64_t> shape);
// A file written with pwrite at `offset` + each piece's offset, after
// `prefix` (e.g. a .npy header, made from the output's type and shape by
// `make_prefix`, which must give the same length whatever it is given, or
// be empty); Discard removes the file.
using PrefixFn = std::function<std::string(DataType dtype, const std::vector<int64_t>& shape)>;
TENSOROPS_EXPORT std::unique_ptr<StreamSink> FileSink(const std::string& path,
                                                      PrefixFn make_prefix = nullptr);
// Callbacks as a source and a sink (e.g. a mapped region, a socket).
TENSOROPS_EXPORT std::unique_ptr<StreamSource> CallbackSource(
    DataType dtype, std::vector<int64_t> shape,
    std::function<absl::Status(int64_t offset, int64_t n, char* out)> read);
TENSOROPS_EXPORT std::unique_ptr<StreamSink> CallbackSink(
    std::function<absl::Status(int64_t offset, absl::string_view data)> write,
    std::function<void()> discard);

// An op attribute: a number, a string or a bool (a JSON value).
class TENSOROPS_EXPORT AttrValue {
 public:
  enum class Kind { kNumber, kString, kBool };
  AttrValue(int v) : kind_(Kind::kNumber), number_(v) {}
  AttrValue(int64_t v) : kind_(Kind::kNumber), number_(static_cast<double>(v)) {}
  AttrValue(double v) : kind_(Kind::kNumber), number_(v) {}
  AttrValue(const char* v) : kind_(Kind::kString), str_(v) {}
  AttrValue(std::string v) : kind_(Kind::kString), str_(std::move(v)) {}
  static AttrValue Bool(bool v) {
    AttrValue a(0);
    a.kind_ = Kind::kBool;
    a.bool_ = v;
    return a;
  }
  Kind kind() const { return kind_; }
  double number() const { return number_; }
  const std::string& str() const { return str_; }
  bool boolean() const { return bool_; }

 private:
  Kind kind_;
  double number_ = 0;
  bool bool_ = false;
  std::string str_;
};
using Attrs = std::map<std::string, AttrValue>;

// Reverse-1 mode: `axes` holds axis indices (kIndex) or one BOOL per axis (kMask).
enum class ReverseMode { kIndex, kMask };

// What ListOps reports about an op (see OpInfo in tensorops.proto).
struct OpInputInfo {
  std::string name;
  std::string description;
  std::vector<DataType> allowed_types;
  int64_t min_rank = 0;
  int64_t max_rank = -1;  // -1: no limit
};
struct OpAttributeInfo {
  std::string name;
  std::string type;  // "int" or "string"
  std::string description;
  bool required = false;
  std::string default_value;
  std::string range;
};
struct OpOutputInfo {
  std::string name;
  std::string description;
};
struct OpInfo {
  std::string name;
  std::vector<std::string> aliases;
  std::string description;
  std::vector<OpInputInfo> inputs;
  std::vector<OpAttributeInfo> attributes;
  std::vector<OpOutputInfo> outputs;
};

// The google.rpc details a failed call's status carries: what the server
// put in grpc-status-details-bin (the SDK keeps each detail on the
// absl::Status as a payload under its type URL,
// "type.googleapis.com/google.rpc.RetryInfo"; this reads them). See the
// error details table in docs/reliability.md for which status carries what.
struct ErrorDetails {
  // google.rpc.RetryInfo: when to try again (a refusal of the queue, the
  // in-flight budget or a drain).
  std::optional<std::chrono::milliseconds> retry_delay;
  // google.rpc.ErrorInfo: the machine-readable reason ("QUEUE_FULL"), its
  // domain ("tensorops") and facts (the flag and its limit). Empty if none.
  std::string reason;
  std::string domain;
  std::map<std::string, std::string> metadata;
  // google.rpc.BadRequest (every INVALID_ARGUMENT): the request field at
  // fault ("inputs[1].shape[0]", "attrs.mode"; "" when the message names
  // none) and its description, the status message's words.
  struct FieldViolation {
    std::string field;
    std::string description;
  };
  std::vector<FieldViolation> field_violations;
  // The type URL of every detail received, those above and any other.
  std::vector<std::string> type_urls;
};
// Reads the details of `status` (a status an SDK call returned); all empty
// for OK or a status without any.
TENSOROPS_EXPORT ErrorDetails GetErrorDetails(const absl::Status& status);

// grpc.health.v1 serving status.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
TENSOROPS_EXPORT absl::string_view ServingStatusName(ServingStatus status);

// One op of a chain (see OpChain): the op's name or an alias, its
// attributes, and its inputs after the first, in the op's input order (e.g.
// Roll: shift, axes). The first input is the chain's data for the first op
// and the previous op's output for the others; it is not part of the step.
struct ChainStep {
  std::string op;
  Attrs attrs;
  std::vector<Tensor> inputs;
};

class OpChain;

using ExecuteResult = absl::StatusOr<std::vector<Tensor>>;
// Runs on a gRPC thread when the call ends; must not block for long.
using ExecuteCallback = std::function<void(ExecuteResult)>;

class TENSOROPS_EXPORT Client {
 public:
  // Validates `options` and creates the channel (connecting lazily).
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Runs `op` (a name or alias from ListOps) with `attrs` on `inputs` (in the
  // op's input order) and returns its outputs.
  ExecuteResult Execute(absl::string_view op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                        const CallOptions& call = {}) const;

  // OpenVINO Reverse-1.
  absl::StatusOr<Tensor> Reverse(const Tensor& data, const Tensor& axes,
                                 ReverseMode mode = ReverseMode::kIndex,
                                 const CallOptions& call = {}) const;
  // OpenVINO ReverseSequence-1.
  absl::StatusOr<Tensor> ReverseSequence(const Tensor& data, const Tensor& seq_lengths,
                                         int64_t batch_axis = 0, int64_t seq_axis = 1,
                                         const CallOptions& call = {}) const;
  // OpenVINO Roll-7.
  absl::StatusOr<Tensor> Roll(const Tensor& data, const Tensor& shift, const Tensor& axes,
                              const CallOptions& call = {}) const;
  // ONNX ReverseSequence (defaults as in ONNX: batch_axis 1, time_axis 0).
  absl::StatusOr<Tensor> OnnxReverseSequence(const Tensor& input, const Tensor& sequence_lens,
                                             int64_t batch_axis = 1, int64_t time_axis = 0,
                                             const CallOptions& call = {}) const;

  // Starts a chain of ops on `data`: each op appended to the returned OpChain
  // takes the previous op's output (the first op takes `data`) as its first
  // input, and OpChain::Run sends them all in one call. See OpChain.
  OpChain Chain(Tensor data) const;

  // Asynchronous Execute: returns at once; `done` runs exactly once when the
  // call ends. Always one Execute message (no streaming: use Execute or the
  // typed calls for tensors past the server's message limit). Views in
  // `inputs` may be released when this returns (the request is serialized
  // before). Retries and resends as Execute's (ClientOptions::retry), the
  // backoff waited without blocking a thread. The Client may be destroyed
  // while calls are in flight; they still complete.
  void ExecuteAsync(absl::string_view op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                    ExecuteCallback done, const CallOptions& call = {}) const;
  // The same with a future.
  std::future<ExecuteResult> ExecuteFuture(absl::string_view op, const Attrs& attrs,
                                           const std::vector<Tensor>& inputs,
                                           const CallOptions& call = {}) const;

  // ExecuteStream from a source to a sink: `data` (the op's first input) is
  // read chunk by chunk, the op's other inputs (`rest`: shift, axes,
  // lengths) travel whole before it, `then` as OpChain's steps, and the
  // output goes to `sink` (flowing, unless call.flow is false): neither
  // side holds the tensor. On any error the sink is told to Discard.
  absl::Status ExecuteStreamed(absl::string_view op, const Attrs& attrs, StreamSource* data,
                               const std::vector<Tensor>& rest, const std::vector<ChainStep>& then,
                               StreamSink* sink, const CallOptions& call = {}) const;

  // Every op the server runs, with inputs, types, ranks and attributes.
  absl::StatusOr<std::vector<OpInfo>> ListOps(const CallOptions& call = {}) const;

  // grpc.health.v1.Health/Check for `service` ("" = the whole server;
  // "tensorops.v1.TensorOps" = the op service).
  absl::StatusOr<ServingStatus> Health(absl::string_view service = "",
                                       const CallOptions& call = {}) const;

 private:
  friend class OpChain;
  struct Impl;
  explicit Client(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with in-flight async calls and OpChains
};

// A chain: several ops run by one call (Execute or ExecuteStream with
// `then` steps), each taking the previous op's output as its first input.
// The result is the last op's output, bit-identical to calling the ops one
// by one; the server makes one pass over memory where it can, and nothing
// between the ops crosses the network.
//
// Made by Client::Chain(data). Each op method appends one op; the first is
// the call's op (with `data` as its first input), the ones after it are its
// `then` steps. A chain of one op is that op (Run(): the same result and
// errors as the typed call). Inputs follow ClientOptions::stream_threshold_bytes
// and CallOptions::transport as a single call's do: a streamed chain sends
// `data` in chunks and the steps' own (small) inputs inline in the header.
//
// Errors, as Run returns them: an error of the first op reads as the single
// call's; an error of a later op names it, `then[i] (Op): ...`, where i counts
// the ops after the first from 0 and input indices are in the op's own order
// (data is inputs[0]): INVALID_ARGUMENT for a bad input or attribute (and
// nothing runs); UNIMPLEMENTED, also naming then[i], for an unknown op. The
// server takes at most 64 ops after the first. A chain without any op is
// INVALID_ARGUMENT.
//
// The chain holds its tensors as given: a Tensor::View's memory must stay
// valid until the last Run returns. It keeps the Client's channel alive, so
// it may outlive the Client.
//
// Thread-safety: building (the non-const methods) is not thread-safe; a built
// chain is a value that may be copied, and Run (const) may be called from
// many threads at once and any number of times.
//
// Example:
//   // Reverse the rows, roll every row by one, then reverse the first
//   // lengths[b] elements of each row b.
//   tensorops::Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
//   absl::StatusOr<tensorops::Tensor> out =
//       client->Chain(data)
//           .Reverse({0})
//           .Roll({1}, {1})
//           .ReverseSequence({2, 3}, /*batch_axis=*/0, /*seq_axis=*/1)
//           .Run();
//   // out: INT32 [2, 3] = [[4, 6, 5], [2, 1, 3]]
//
//   // Any op by name (here Roll by its alias), with attributes and inputs:
//   absl::StatusOr<tensorops::Tensor> rolled =
//       client->Chain(data).Then("Roll-7", {}, {shift, axes}).Run();
class TENSOROPS_EXPORT OpChain {
 public:
  // Appends `op` (a name or alias from ListOps) with `attrs` and its inputs
  // after the first, in the op's input order.
  OpChain& Then(absl::string_view op, Attrs attrs = {}, std::vector<Tensor> inputs = {});
  OpChain& Then(ChainStep step);

  // Appends an op as the Client's typed call of the same name, without its
  // first input. The std::vector<int64_t> forms build 1-D INT64 tensors, so
  // small axis and shift lists read as literals: Reverse({0}), Roll({1}, {1}).
  OpChain& Reverse(const Tensor& axes, ReverseMode mode = ReverseMode::kIndex);
  OpChain& Reverse(const std::vector<int64_t>& axes) { return Reverse(Tensor(axes)); }
  OpChain& ReverseSequence(const Tensor& seq_lengths, int64_t batch_axis = 0, int64_t seq_axis = 1);
  OpChain& ReverseSequence(const std::vector<int64_t>& seq_lengths, int64_t batch_axis = 0,
                           int64_t seq_axis = 1) {
    return ReverseSequence(Tensor(seq_lengths), batch_axis, seq_axis);
  }
  OpChain& Roll(const Tensor& shift, const Tensor& axes);
  OpChain& Roll(const std::vector<int64_t>& shift, const std::vector<int64_t>& axes) {
    return Roll(Tensor(shift), Tensor(axes));
  }
  OpChain& OnnxReverseSequence(const Tensor& sequence_lens, int64_t batch_axis = 1,
                               int64_t time_axis = 0);
  OpChain& OnnxReverseSequence(const std::vector<int64_t>& sequence_lens, int64_t batch_axis = 1,
                               int64_t time_axis = 0) {
    return OnnxReverseSequence(Tensor(sequence_lens), batch_axis, time_axis);
  }

  // Runs the chain in one call and returns the last op's one output
  // (INTERNAL if it has another number of outputs; use RunAll then).
  absl::StatusOr<Tensor> Run(const CallOptions& call = {}) const;
  // Runs the chain in one call and returns all of the last op's outputs.
  ExecuteResult RunAll(const CallOptions& call = {}) const;

  // The ops appended so far, first op first, each without its first input.
  const std::vector<ChainStep>& ops() const { return ops_; }

 private:
  friend class Client;
  OpChain(std::shared_ptr<const Client::Impl> impl, Tensor data);

  std::shared_ptr<const Client::Impl> impl_;
  Tensor data_;
  std::vector<ChainStep> ops_;  // ops_[0]: the call's op; ops_[i]: then[i - 1]
};

// Sets this process's glibc malloc for big tensors, as tensorops-server
// runs by default: blocks up to 32 MiB from the heap, up to 1 GiB of freed
// memory kept in it, one arena. Without it, glibc gives freed memory back to
// the kernel at once and a process that receives big tensors faults their
// pages in again on every call (gRPC's receive buffers; a 1 GiB streamed
// Roll's figures with and without it: BENCHMARKS.md, "The SDK's output from
// the buffer cache"). The price: freed
// memory stays in the process (up to 1 GiB) and every thread shares one
// heap lock. Process-wide, so the SDK never does it by itself: call it
// once, early, before other threads start, if the process is mostly about
// big tensors (the tensorops CLI does). False off glibc (nothing done).
//
// Example:
//   int main() {
//     tensorops::TuneMallocForBigTensors();
//     auto client = tensorops::Client::Create(options);
//     ...
TENSOROPS_EXPORT bool TuneMallocForBigTensors();

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_CLIENT_H_
