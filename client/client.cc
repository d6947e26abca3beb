#include "tensorops/client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/wire_codec.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "kernels/huge_pages.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "wire/crc32.h"
#include "wire/limits.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
inline namespace client_v1 {

// Builds Tensors around bytes received from the wire without copying them.
class TensorAccess {
 public:
  static Tensor FromRaw(DataType dtype, std::vector<int64_t> shape, std::string bytes) {
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    auto owned = std::make_shared<const std::string>(std::move(bytes));
    t.data_ = owned->data();
    t.num_bytes_ = static_cast<int64_t>(owned->size());
    t.owned_ = std::move(owned);
    return t;
  }
  // What keeps a non-STRING tensor's bytes alive; null for a View (memory
  // the caller owns).
  static std::shared_ptr<const void> Owner(const Tensor& t) { return t.owned_; }
};

namespace {

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

std::string Seconds(std::chrono::milliseconds ms) {
  return absl::StrFormat("%.3fs", static_cast<double>(ms.count()) / 1000.0);
}

std::string ServiceConfigJson(const ClientOptions& options) {
  std::string json = "{";
  if (!options.load_balancing_policy.empty()) {
    absl::StrAppend(&json, "\"loadBalancingConfig\":[{\"", options.load_balancing_policy,
                    "\":{}}]");
  }
  if (options.retry.enabled) {
    if (json.size() > 1) json += ",";
    const RetryPolicy& r = options.retry;
    const auto policy = [&r](absl::string_view codes) {
      return absl::StrCat("\"retryPolicy\":{\"maxAttempts\":", r.max_attempts,
                          ",\"initialBackoff\":\"", Seconds(r.initial_backoff),
                          "\",\"maxBackoff\":\"", Seconds(r.max_backoff),
                          "\",\"backoffMultiplier\":", absl::StrFormat("%g", r.backoff_multiplier),
                          ",\"retryableStatusCodes\":[", codes, "]}");
    };
    // RESOURCE_EXHAUSTED (the server's refusals with RetryInfo) is retried for
    // the unary Execute only: retrying it on a bidi stream that gRPC's memory
    // quota reset (RST_STREAM 11) while the SDK's threads read and write it
    // crashed gRPC 1.51's retry filter (memory_limit_e2e_test under gdb).
    absl::StrAppend(&json,
                    "\"methodConfig\":[{\"name\":[{\"service\":\"tensorops.v1.TensorOps\","
                    "\"method\":\"Execute\"}],",
                    policy("\"UNAVAILABLE\",\"RESOURCE_EXHAUSTED\""),
                    "},{\"name\":[{\"service\":\"tensorops.v1.TensorOps\"},"
                    "{\"service\":\"grpc.health.v1.Health\"}],",
                    policy("\"UNAVAILABLE\""), "}]");
  }
  json += "}";
  return json;
}

// `what` prefixes an error: "" for the call's op, "then[i] (Op): " for a
// chain's step.
absl::Status EncodeInput(const Tensor& t, absl::string_view what, size_t index, v1::Tensor* proto) {
  absl::Status valid = t.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, "inputs[", index, "]: ", valid.message()));
  }
  proto->set_dtype(static_cast<v1::DataType>(t.dtype()));
  for (int64_t d : t.shape()) proto->add_shape(d);
  if (t.dtype() == DataType::kString) {
    for (const std::string& s : t.strings()) proto->add_string_data(s);
  } else {
    proto->set_raw_data(t.bytes().data(), t.bytes().size());
  }
  return absl::OkStatus();
}

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

absl::StatusOr<Tensor> SingleOutput(ExecuteResult result) {
  if (!result.ok()) return result.status();
  if (result->size() != 1) {
    return absl::InternalError(
        absl::StrCat("server returned ", result->size(), " outputs, expected 1"));
  }
  return std::move(result->front());
}

}  // namespace

namespace {
struct StreamInput;
}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TensorOps::Stub> stub;
  // ExecuteStream called raw (grpc::ByteBuffer messages on the generated
  // stub's method path), so chunks leave and enter tensors without protobuf
  // copies (wire/stream_chunk.h). gRPC keeps a pointer to the name.
  std::string stream_method_name;
  std::unique_ptr<grpc::internal::RpcMethod> stream_method;

  // Per-call context: the deadline and, when configured, the bearer token.
  // Whether a unary call that ended `st` on its `attempt`-th try is sent
  // again (after sleeping its backoff): see the definition.
  bool ResendCutAnswer(const absl::Status& st, int attempt, size_t request_bytes,
                       std::chrono::system_clock::time_point deadline) const;

  void SetDeadline(const CallOptions& call, grpc::ClientContext* ctx) const {
    const std::chrono::milliseconds d = call.deadline.value_or(options.default_deadline);
    if (d.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + d);
    if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
  }

  // The traceparent an Execute sends: the caller's, or a new trace's.
  static std::string Traceparent(const CallOptions& call) {
    return call.traceparent.empty() ? NewTraceparent() : call.traceparent;
  }
  // Sends `traceparent` (and the caller's tracestate) with the call.
  static void AddTrace(const CallOptions& call, const std::string& traceparent,
                       grpc::ClientContext* ctx) {
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
                            v1::ExecuteRequest* request) const {
    request->set_op(std::string(op));
    FillAttrs(attrs, request->mutable_attrs());
    for (size_t i = 0; i < inputs.size(); ++i) {
      absl::Status st = EncodeInput(inputs[i], "", i, request->add_inputs());
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

  // Execute and chains: one Execute message or ExecuteStream, as UseStream says.
  ExecuteResult Call(absl::string_view op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                     absl::Span<const ChainStep> then, const CallOptions& call) const;
  ExecuteResult ExecuteStream(absl::string_view op, const Attrs& attrs,
                              const std::vector<Tensor>& inputs, absl::Span<const ChainStep> then,
                              const CallOptions& call) const;
  // ExecuteStream from inputs (tensors or sources) into `sink` (one output).
  absl::Status Stream(absl::string_view op, const Attrs& attrs,
                      const std::vector<StreamInput>& inputs, absl::Span<const ChainStep> then,
                      const CallOptions& call, StreamSink* sink) const;
  absl::StatusOr<v1::ExecuteStreamRequest> StreamHeader(absl::string_view op, const Attrs& attrs,
                                                        const std::vector<StreamInput>& inputs,
                                                        absl::Span<const ChainStep> then,
                                                        const CallOptions& call) const;
};

namespace {

// One streamed input: a Tensor held whole, or a source read chunk by chunk.
struct StreamInput {
  const Tensor* tensor = nullptr;
  StreamSource* source = nullptr;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

absl::Status MalformedStream(absl::string_view what) {
  return absl::InternalError(absl::StrCat("malformed ExecuteStream reply from server: ", what));
}

// A streamed call's output into memory that becomes the result Tensor: each
// piece is copied once, from gRPC's receive slices to its offset.
// Thread-compatible (StreamSink's contract).
class BufferSink final : public StreamSink {
 public:
  absl::Status Start(DataType dtype, const std::vector<int64_t>& shape, int64_t bytes) override {
    dtype_ = dtype;
    shape_ = shape;
    // Sized at once: a flowing output's chunks land at any offset. Huge
    // pages are advised between reserve() (a fresh mapping, untouched) and
    // resize() (its zero-fill is the first touch): advised after the touch,
    // every 4 KiB page of the output faulted on its own (issue 44's profile
    // of a 1 GiB streamed Roll: 30% of the SDK's time in page faults); now
    // ~130k instead of ~384k faults per 1 GiB call.
    data_.reserve(static_cast<size_t>(bytes));
    AdviseHugePages(data_.data(), bytes);
    data_.resize(static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    std::memcpy(data_.data() + offset, data.data(), data.size());
    return absl::OkStatus();
  }
  void Discard() override { std::string().swap(data_); }
  Tensor Take() { return TensorAccess::FromRaw(dtype_, std::move(shape_), std::move(data_)); }

 private:
  DataType dtype_ = DataType::kInvalid;
  std::vector<int64_t> shape_;
  std::string data_;
};

// One output while its chunks arrive.
struct StreamedOutput {
  int64_t bytes = 0;
  int64_t received = 0;
  uint32_t expected_crc = 0;              // the header's (not flowing)
  uint32_t crc = 0;                       // in order (not flowing)
  std::unique_ptr<Crc32OfPieces> pieces;  // flowing: the chunks' CRCs in any order
  StreamSink* sink = nullptr;
  bool started = false;
};

// Progress of a streamed call. Flowing, the replies are read on a thread of
// their own while the calling thread sends; this is what they share, so
// that the callback still runs on the calling thread only (a caller's
// callback, the CLI's progress bar say, need not be thread-safe).
// Thread-safe. std::mutex rather than absl::Mutex so ThreadSanitizer sees it
// (see kernels/thread_pool.h): with absl::Mutex its reports of this state
// were suppressed only because an Abseil frame was in the stack.
class ProgressState {
 public:
  ProgressState(TransferProgress start, const ProgressCallback* callback)
      : progress_(start), callback_(callback) {}
  // Calling thread only.
  void Sent(int64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_.bytes_sent += n;
    }
    Report();
  }
  // `n` more bytes received. `report`: the caller is the calling thread
  // (not flowing: it reads the replies itself), so it reports now.
  void Received(int64_t n, int64_t to_receive, bool report) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_.bytes_received += n;
      progress_.bytes_to_receive = to_receive;
      ++version_;
    }
    changed_.notify_one();
    if (report) Report();
  }
  void ReaderDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reader_done_ = true;
    }
    changed_.notify_one();
  }
  // The calling thread, after sending: reports each change until the reader ends.
  void ReportUntilReaderDone() {
    int64_t seen = -1;
    for (;;) {
      bool done = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [this, seen] { return reader_done_ || version_ != seen; });
        done = reader_done_;
        seen = version_;
      }
      Report();
      if (done) return;
    }
  }
  // Calling thread only.
  void Report() {
    if (!*callback_) return;
    TransferProgress p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      p = progress_;
    }
    (*callback_)(p);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;  // version_ or reader_done_ changed
  TransferProgress progress_;        // guarded by mu_
  int64_t version_ = 0;              // guarded by mu_
  bool reader_done_ = false;         // guarded by mu_
  const ProgressCallback* callback_;
};

using RawStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// Reads the replies of one streamed call into its outputs' sinks, checking
// every offset and CRC-32 (thread-compatible: one thread reads). Flowing
// (asked for), that is a thread of its own, which never runs the progress
// callback.
class ReplyReader {
 public:
  ReplyReader(bool flow, std::vector<StreamSink*> sinks, ProgressState* progress)
      : flow_(flow), own_thread_(flow), sinks_(std::move(sinks)), progress_(progress) {}

  // Every message until the stream ends or one is wrong (then the caller cancels).
  absl::Status ReadAll(RawStream* stream);
  // After the call's OK status: everything arrived and checks out.
  absl::Status Check() const;
  const std::vector<StreamedOutput>& outputs() const { return outputs_; }

 private:
  absl::Status OnHeader(const v1::StreamOutputHeader& header);
  absl::Status OnChunk(const ChunkInPlace& chunk);
  absl::Status OnTrailer(const v1::StreamOutputTrailer& trailer);

  // Flowing: asked for, and the server's header says it flows (CRC-32 0; a
  // server from before flowing streams ignores the flag and sends its CRC).
  bool flow_;
  // Read on a thread of its own (flowing was asked for, whatever the server
  // answers): progress is reported by the calling thread.
  const bool own_thread_;
  std::vector<StreamSink*> sinks_;
  ProgressState* progress_;
  std::vector<StreamedOutput> outputs_;
  bool have_header_ = false;
  bool have_trailer_ = false;
  int64_t to_receive_ = 0;
};

absl::Status ReplyReader::ReadAll(RawStream* stream) {
  grpc::ByteBuffer buffer;
  std::vector<grpc::Slice> slices;
  ChunkInPlace chunk;
  v1::ExecuteStreamResponse resp;
  while (stream->Read(&buffer)) {
    if (have_trailer_) return MalformedStream("a message after the trailer");
    // Chunks in the usual encoding are read in place; anything else (the
    // header, the trailer, unusual encodings) by protobuf. `slices` lets go
    // of the receive slices before `buffer` does: gRPC 1.51 frees them into
    // the channel's resource quota, which needs an ExecCtx that only the
    // buffer's release opens (server/grpc/stream_reactor.cc, ReleaseSlices).
    if (have_header_ && buffer.Dump(&slices).ok() && ReadChunkInPlace(slices, &chunk)) {
      const absl::Status s = OnChunk(chunk);
      chunk.pieces.clear();
      slices.clear();
      if (!s.ok()) return s;
      continue;
    }
    chunk.pieces.clear();
    slices.clear();
    resp.Clear();
    if (!grpc::SerializationTraits<v1::ExecuteStreamResponse>::Deserialize(&buffer, &resp).ok()) {
      return MalformedStream("a message that is not an ExecuteStreamResponse");
    }
    absl::Status s;
    if (!have_header_) {
      s = resp.has_header() ? OnHeader(resp.header())
                            : MalformedStream("first message is not a header");
    } else if (resp.has_chunk()) {
      chunk.tensor = resp.chunk().tensor();
      chunk.offset = resp.chunk().offset();
      chunk.size = static_cast<int64_t>(resp.chunk().data().size());
      chunk.crc32 = resp.chunk().crc32();
      chunk.pieces.assign(1, absl::string_view(resp.chunk().data()));
      s = OnChunk(chunk);
    } else if (resp.has_trailer() && flow_) {
      s = OnTrailer(resp.trailer());
    } else {
      s = MalformedStream("a message that is neither chunk nor trailer");
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReplyReader::OnHeader(const v1::StreamOutputHeader& header) {
  have_header_ = true;
  if (header.outputs_size() != static_cast<int>(sinks_.size()) && sinks_.size() == 1 &&
      sinks_[0] != nullptr) {
    return MalformedStream(absl::StrCat(header.outputs_size(), " outputs for one sink"));
  }
  for (const v1::TensorHeader& h : header.outputs()) {
    if (h.crc32() != 0) flow_ = false;
  }
  for (const v1::TensorHeader& h : header.outputs()) {
    const std::string what = absl::StrCat("outputs[", outputs_.size(), "]");
    absl::StatusOr<int64_t> bytes = client_internal::StreamedTensorBytes(h, what);
    if (!bytes.ok()) return MalformedStream(bytes.status().message());
    StreamedOutput o;
    o.bytes = *bytes;
    o.expected_crc = h.crc32();
    if (flow_) o.pieces = std::make_unique<Crc32OfPieces>(o.bytes);
    o.sink = outputs_.size() < sinks_.size() ? sinks_[outputs_.size()] : nullptr;
    if (o.sink == nullptr) return MalformedStream(absl::StrCat("more outputs than expected"));
    const std::vector<int64_t> shape(h.shape().begin(), h.shape().end());
    if (absl::Status s = o.sink->Start(static_cast<DataType>(h.dtype()), shape, o.bytes); !s.ok()) {
      return s;
    }
    o.started = true;
    to_receive_ += o.bytes;
    outputs_.push_back(std::move(o));
  }
  progress_->Received(0, to_receive_, /*report=*/false);
  return absl::OkStatus();
}

absl::Status ReplyReader::OnChunk(const ChunkInPlace& chunk) {
  if (chunk.tensor >= outputs_.size()) return MalformedStream("chunk without a known output");
  StreamedOutput& o = outputs_[chunk.tensor];
  // Flowing: any offset inside the output; else the next bytes in order.
  const bool placed = flow_ ? chunk.offset <= static_cast<uint64_t>(o.bytes) &&
                                  chunk.size <= o.bytes - static_cast<int64_t>(chunk.offset) &&
                                  chunk.size <= o.bytes - o.received
                            : chunk.offset == static_cast<uint64_t>(o.received) &&
                                  chunk.size <= o.bytes - o.received;
  if (!placed) {
    return MalformedStream(absl::StrCat("chunk at offset ", chunk.offset, " of output ",
                                        chunk.tensor, " out of place"));
  }
  uint32_t crc = 0;
  int64_t at = static_cast<int64_t>(chunk.offset);
  absl::Status written;
  for (absl::string_view p : chunk.pieces) {
    crc = Crc32WhileCopying(crc, p, [&](const char* block, size_t k) {
      if (written.ok()) written = o.sink->Write(at, absl::string_view(block, k));
      at += static_cast<int64_t>(k);
    });
  }
  if (!written.ok()) return written;
  if (flow_) {
    if (crc != chunk.crc32) {
      return absl::DataLossError(absl::StrFormat(
          "outputs[%d] chunk at offset %d is corrupt: the server's CRC-32 is 0x%08x, the "
          "received bytes give 0x%08x",
          chunk.tensor, chunk.offset, chunk.crc32, crc));
    }
    o.pieces->Add(static_cast<int64_t>(chunk.offset), chunk.size, crc);
  } else {
    o.crc = Crc32Combine(o.crc, crc, chunk.size);
  }
  o.received += chunk.size;
  progress_->Received(chunk.size, to_receive_, /*report=*/!own_thread_);
  return absl::OkStatus();
}

absl::Status ReplyReader::OnTrailer(const v1::StreamOutputTrailer& trailer) {
  if (trailer.crc32_size() != static_cast<int>(outputs_.size())) {
    return MalformedStream(absl::StrCat("the trailer has ", trailer.crc32_size(), " CRC-32s for ",
                                        outputs_.size(), " outputs"));
  }
  for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i].expected_crc = trailer.crc32(i);
  have_trailer_ = true;
  return absl::OkStatus();
}

absl::Status ReplyReader::Check() const {
  if (!have_header_) return MalformedStream("no output header");
  bool empty = true;  // an empty output's header says CRC-32 0, flowing or not
  for (const StreamedOutput& o : outputs_) empty = empty && o.bytes == 0;
  if (flow_ && !have_trailer_ && !empty) return MalformedStream("no trailer");
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const StreamedOutput& o = outputs_[i];
    if (o.received != o.bytes) {
      return absl::DataLossError(absl::StrCat("ExecuteStream reply ended after ", o.received,
                                              " of ", o.bytes, " bytes of outputs[", i, "]"));
    }
    const uint32_t crc = flow_ ? o.pieces->Value() : o.crc;
    if (crc != o.expected_crc) {
      return absl::DataLossError(absl::StrFormat(
          "outputs[%d] is corrupt: the server's CRC-32 is 0x%08x, the received bytes give 0x%08x",
          i, o.expected_crc, crc));
    }
  }
  return absl::OkStatus();
}

// `bytes[off, off + n)` of input `index` as a chunk message. An owned tensor's
// bytes are sent in place (the slice holds the tensor's storage); a View's
// are copied once: gRPC may hold a slice past the call's end, and a View's
// memory is the caller's to free as soon as the call returns.
grpc::ByteBuffer InputChunk(uint32_t index, const Tensor& t, int64_t off, int64_t n) {
  const absl::string_view data(t.bytes().data() + off, static_cast<size_t>(n));
  std::shared_ptr<const void> owner = TensorAccess::Owner(t);
  if (owner == nullptr) {
    auto copy = std::make_shared<const std::string>(data);
    return EncodeChunkInPlace(index, static_cast<uint64_t>(off), *copy, copy);
  }
  return EncodeChunkInPlace(index, static_cast<uint64_t>(off), data, std::move(owner));
}

// A source's bytes, chunk by chunk, each with its CRC-32 (checked by the server).
absl::StatusOr<grpc::ByteBuffer> SourceChunk(uint32_t index, StreamSource* source, int64_t off,
                                             int64_t n) {
  auto buffer = std::make_shared<std::string>(static_cast<size_t>(n), '\0');
  if (absl::Status s = source->Read(off, n, buffer->data()); !s.ok()) return s;
  const uint32_t crc = Crc32(0, buffer->data(), n);
  const absl::string_view data(*buffer);
  return EncodeChunkInPlace(index, static_cast<uint64_t>(off), data, std::move(buffer), crc);
}

// A source's CRC-32 over all its bytes (the header's): a first pass over it.
absl::StatusOr<uint32_t> SourceCrc(StreamSource* source, int64_t bytes, int64_t chunk_bytes) {
  std::string buffer(static_cast<size_t>(std::min(bytes, chunk_bytes)), '\0');
  uint32_t crc = 0;
  for (int64_t off = 0; off < bytes; off += chunk_bytes) {
    const int64_t n = std::min(chunk_bytes, bytes - off);
    if (absl::Status s = source->Read(off, n, buffer.data()); !s.ok()) return s;
    crc = Crc32(crc, buffer.data(), n);
  }
  return crc;
}

// Sends every input: the small ones (shift, axes, lengths) before the data,
// so that a flowing server can start on the data's first chunk. False once a
// write fails (the call is over; Finish says why); a source's read error in
// `*error`.
bool SendInputs(RawStream* stream, const std::vector<StreamInput>& inputs, int64_t chunk_bytes,
                ProgressState* progress, absl::Status* error) {
  std::vector<size_t> order;
  for (size_t i = 1; i < inputs.size(); ++i) order.push_back(i);
  if (!inputs.empty()) order.push_back(0);
  for (size_t i : order) {
    const StreamInput& in = inputs[i];
    for (int64_t off = 0; off < in.bytes; off += chunk_bytes) {
      const int64_t n = std::min(chunk_bytes, in.bytes - off);
      grpc::ByteBuffer chunk;
      if (in.source != nullptr) {
        absl::StatusOr<grpc::ByteBuffer> c =
            SourceChunk(static_cast<uint32_t>(i), in.source, off, n);
        if (!c.ok()) {
          *error = c.status();
          return false;
        }
        chunk = *std::move(c);
      } else {
        chunk = InputChunk(static_cast<uint32_t>(i), *in.tensor, off, n);
      }
      if (!stream->Write(chunk)) return false;
      progress->Sent(n);
    }
  }
  return stream->WritesDone();
}

}  // namespace

absl::StatusOr<v1::ExecuteStreamRequest> Client::Impl::StreamHeader(
    absl::string_view op, const Attrs& attrs, const std::vector<StreamInput>& inputs,
    absl::Span<const ChainStep> then, const CallOptions& call) const {
  v1::ExecuteStreamRequest header_msg;
  v1::StreamHeader* header = header_msg.mutable_header();
  header->set_op(std::string(op));
  header->set_flow(call.flow);
  FillAttrs(attrs, header->mutable_attrs());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const StreamInput& in = inputs[i];
    if (in.dtype == DataType::kString) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs[", i, "] is STRING, which cannot be streamed; use Transport::kUnary"));
    }
    v1::TensorHeader* h = header->add_inputs();
    h->set_dtype(static_cast<v1::DataType>(in.dtype));
    for (int64_t d : in.shape) h->add_shape(d);
    if (in.source != nullptr) {
      absl::StatusOr<uint32_t> crc =
          SourceCrc(in.source, in.bytes, std::max<int64_t>(1, options.stream_chunk_bytes));
      if (!crc.ok()) return crc.status();
      h->set_crc32(*crc);
    } else {
      h->set_crc32(Crc32(0, in.tensor->bytes().data(), in.bytes));
    }
  }
  if (absl::Status st = BuildSteps(then, header->mutable_then()); !st.ok()) return st;
  return header_msg;
}

absl::Status Client::Impl::Stream(absl::string_view op, const Attrs& attrs,
                                  const std::vector<StreamInput>& inputs,
                                  absl::Span<const ChainStep> then, const CallOptions& call,
                                  StreamSink* sink) const {
  absl::StatusOr<v1::ExecuteStreamRequest> header = StreamHeader(op, attrs, inputs, then, call);
  if (!header.ok()) return header.status();
  TransferProgress start;
  for (const StreamInput& in : inputs) start.bytes_to_send += in.bytes;
  // Known at once for the ops built into the SDK (their output inference);
  // else from the server's output header.
  start.expected_bytes_to_receive =
      client_internal::InferredOutputBytes(header->header()).value_or(0);
  ProgressState progress(start, &call.progress);
  grpc::ByteBuffer header_buffer;
  bool own_buffer = false;
  if (!grpc::SerializationTraits<v1::ExecuteStreamRequest>::Serialize(*header, &header_buffer,
                                                                      &own_buffer)
           .ok()) {
    return absl::InternalError("could not serialise the ExecuteStream header");
  }
  const int64_t chunk_bytes = std::max<int64_t>(1, options.stream_chunk_bytes);
  grpc::ClientContext ctx;
  SetDeadline(call, &ctx);
  const std::string traceparent = Traceparent(call);
  AddTrace(call, traceparent, &ctx);
  std::unique_ptr<RawStream> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), *stream_method, &ctx));
  ReplyReader reader(call.flow, {sink}, &progress);
  absl::Status reply_error;
  absl::Status send_error;
  if (call.flow) {
    // The output comes back while the input goes out: a thread reads it, or
    // the server's window would fill and both sides wait on each other.
    std::thread read_thread([&] {
      reply_error = reader.ReadAll(stream.get());
      if (!reply_error.ok()) ctx.TryCancel();
      progress.ReaderDone();
    });
    if (stream->Write(header_buffer)) {
      SendInputs(stream.get(), inputs, chunk_bytes, &progress, &send_error);
    }
    if (!send_error.ok()) ctx.TryCancel();
    progress.ReportUntilReaderDone();
    read_thread.join();
  } else {
    if (stream->Write(header_buffer)) {
      SendInputs(stream.get(), inputs, chunk_bytes, &progress, &send_error);
    }
    if (!send_error.ok()) ctx.TryCancel();
    reply_error = reader.ReadAll(stream.get());
    if (!reply_error.ok()) ctx.TryCancel();
  }
  absl::Status st = FromGrpcStatus(stream->Finish());
  ReadTrace(call, traceparent, ctx);
  if (!send_error.ok()) st = send_error;
  if (!reply_error.ok()) st = reply_error;
  if (st.ok()) st = reader.Check();
  if (!st.ok()) {
    // Output already placed is void (a flowing call's bytes come before its status).
    for (const StreamedOutput& o : reader.outputs()) {
      if (o.started) o.sink->Discard();
    }
    return st;
  }
  return sink->Finish();
}

ExecuteResult Client::Impl::ExecuteStream(absl::string_view op, const Attrs& attrs,
                                          const std::vector<Tensor>& inputs,
                                          absl::Span<const ChainStep> then,
                                          const CallOptions& call) const {
  std::vector<StreamInput> streamed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (absl::Status valid = t.Validate(); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "]: ", valid.message()));
    }
    StreamInput in;
    in.tensor = &t;
    in.dtype = t.dtype();
    in.shape = t.shape();
    in.bytes = static_cast<int64_t>(t.bytes().size());
    streamed.push_back(std::move(in));
  }
  BufferSink sink;
  if (absl::Status s = Stream(op, attrs, streamed, then, call, &sink); !s.ok()) return s;
  std::vector<Tensor> result;
  result.push_back(sink.Take());
  return result;
}

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

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
  absl::Status st = BuildRequest(op, attrs, inputs, then, &request);
  if (!st.ok()) return st;
  // One deadline for every attempt.
  const std::chrono::milliseconds d = call.deadline.value_or(options.default_deadline);
  const auto deadline = d.count() > 0 ? std::chrono::system_clock::now() + d
                                      : std::chrono::system_clock::time_point::max();
  v1::ExecuteResponse response;
  // One trace for every attempt.
  const std::string traceparent = Traceparent(call);
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext ctx;
    SetDeadline(call, &ctx);
    if (d.count() > 0) ctx.set_deadline(deadline);
    AddTrace(call, traceparent, &ctx);
    response.Clear();
    st = FromGrpcStatus(stub->Execute(&ctx, request, &response));
    ReadTrace(call, traceparent, ctx);
    if (st.ok() || !ResendCutAnswer(st, attempt, request.ByteSizeLong(), deadline)) break;
  }
  if (!st.ok()) return st;
  return DecodeResponse(&response);
}

bool Client::Impl::ResendCutAnswer(const absl::Status& st, int attempt, size_t request_bytes,
                                   std::chrono::system_clock::time_point deadline) const {
  // What gRPC's retries (the policy above) cannot resend, and this SDK can
  // (it holds the request anyway; every op is a pure function of it):
  //  - an answer cut after its first byte, where gRPC's retries stop: a
  //    replica that died while it sent the answer comes back from a proxy
  //    as UNKNOWN "Stream removed" (HAProxy 2.6 resets the stream after the
  //    response headers: issue 36). Our servers never answer UNKNOWN;
  //  - an UNAVAILABLE call over max_buffered_bytes, which gRPC commits to
  //    its first attempt: e.g. a connection the server closed after its
  //    max-age GOAWAY while the call was on its way (gRPC 1.51 then resets
  //    the socket, and the client never reads the GOAWAY that would have
  //    told it the call was not processed).
  // Within the policy's attempts and the call's deadline.
  const RetryPolicy& r = options.retry;
  const bool cut = st.code() == absl::StatusCode::kUnknown;
  const bool unbuffered = st.code() == absl::StatusCode::kUnavailable &&
                          static_cast<int64_t>(request_bytes) > r.max_buffered_bytes;
  if (!(cut || unbuffered) || !r.enabled || attempt >= r.max_attempts) return false;
  const auto backoff = r.initial_backoff * std::pow(r.backoff_multiplier, attempt - 1);
  const auto wait = std::min<std::chrono::milliseconds>(
      r.max_backoff, std::chrono::duration_cast<std::chrono::milliseconds>(backoff));
  if (std::chrono::system_clock::now() + wait >= deadline) return false;
  std::this_thread::sleep_for(wait);
  return true;
}

absl::Status Client::ExecuteStreamed(absl::string_view op, const Attrs& attrs, StreamSource* data,
                                     const std::vector<Tensor>& rest,
                                     const std::vector<ChainStep>& then, StreamSink* sink,
                                     const CallOptions& call) const {
  std::vector<StreamInput> inputs(1);
  inputs[0].source = data;
  inputs[0].dtype = data->dtype();
  inputs[0].shape = data->shape();
  inputs[0].bytes = DataTypeWidth(inputs[0].dtype);
  for (int64_t d : inputs[0].shape) inputs[0].bytes *= d;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (absl::Status valid = rest[i].Validate(); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i + 1, "]: ", valid.message()));
    }
    StreamInput in;
    in.tensor = &rest[i];
    in.dtype = rest[i].dtype();
    in.shape = rest[i].shape();
    in.bytes = static_cast<int64_t>(rest[i].bytes().size());
    inputs.push_back(std::move(in));
  }
  return impl_->Stream(op, attrs, inputs, then, call, sink);
}

ExecuteResult Client::Execute(absl::string_view op, const Attrs& attrs,
                              const std::vector<Tensor>& inputs, const CallOptions& call) const {
  return impl_->Call(op, attrs, inputs, {}, call);
}

void Client::ExecuteAsync(absl::string_view op, const Attrs& attrs,
                          const std::vector<Tensor>& inputs, ExecuteCallback done,
                          const CallOptions& call) const {
  // Everything the call needs lives here until gRPC runs the completion,
  // including a reference to the channel and stub.
  struct AsyncCall {
    std::shared_ptr<Impl> impl;
    grpc::ClientContext ctx;
    v1::ExecuteRequest request;
    v1::ExecuteResponse response;
    ExecuteCallback done;
    std::string traceparent;
    CallOptions call;  // its trace settings (ReadTrace)
  };
  auto* c = new AsyncCall;
  c->impl = impl_;
  c->done = std::move(done);
  c->traceparent = Impl::Traceparent(call);
  c->call.tracestate = call.tracestate;
  c->call.trace = call.trace;
  absl::Status st = impl_->BuildRequest(op, attrs, inputs, {}, &c->request);
  if (!st.ok()) {
    ExecuteCallback cb = std::move(c->done);
    delete c;
    cb(st);
    return;
  }
  impl_->SetDeadline(call, &c->ctx);
  Impl::AddTrace(call, c->traceparent, &c->ctx);
  impl_->stub->async()->Execute(&c->ctx, &c->request, &c->response, [c](grpc::Status status) {
    std::unique_ptr<AsyncCall> owned(c);
    Impl::ReadTrace(owned->call, owned->traceparent, owned->ctx);
    // The call may hold the last reference to the channel (the Client was
    // destroyed while it ran). A channel must not be destroyed on the thread
    // running its own callback (gRPC then frees its callback queue twice), so
    // keep the reference here and, if it is the last, drop it on another thread.
    std::shared_ptr<Impl> impl = std::move(owned->impl);
    absl::Status st = FromGrpcStatus(status);
    ExecuteCallback cb = std::move(owned->done);
    if (!st.ok()) {
      owned.reset();
      cb(st);
    } else {
      ExecuteResult result = DecodeResponse(&owned->response);
      owned.reset();
      cb(std::move(result));
    }
    if (impl.use_count() == 1) {
      std::thread([last = std::move(impl)]() mutable { last.reset(); }).detach();
    }
  });
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
