// The SDK's streamed call (ExecuteStream): its header (types, shapes,
// CRC-32s), sending the inputs in chunks, reading the replies (ReplyReader:
// offsets and CRCs checked, flowing or not), progress reported on the
// calling thread; Client::Impl::Stream, ExecuteStream and
// Client::ExecuteStreamed. The sources and sinks it reads from and writes to
// are in stream_io.cc; Client::Impl (client_impl.h) declares what is here.

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/client_impl.h"
#include "client/stream_io.h"
#include "client/tensor_access.h"
#include "client/wire_codec.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "wire/crc32.h"
#include "wire/status.h"
#include "wire/stream_chunk.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

absl::Status MalformedStream(absl::string_view what) {
  return absl::InternalError(absl::StrCat("malformed ExecuteStream reply from server: ", what));
}

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

}  // namespace

// Not in the anonymous namespace: Client::Impl::StreamAttempt takes it
// (client_impl.h declares it).
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

namespace {

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

absl::Status Client::Impl::StreamAttempt(const grpc::ByteBuffer& header_buffer,
                                         const std::vector<StreamInput>& inputs,
                                         const CallOptions& call,
                                         std::chrono::system_clock::time_point deadline,
                                         const std::string& traceparent, StreamSink* sink,
                                         ProgressState* progress, bool* output_started) const {
  const int64_t chunk_bytes = std::max<int64_t>(1, options.stream_chunk_bytes);
  grpc::ClientContext ctx;
  SetDeadline(deadline, &ctx);
  AddTrace(call, traceparent, &ctx);
  std::unique_ptr<RawStream> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), *stream_method, &ctx));
  ReplyReader reader(call.flow, {sink}, progress);
  absl::Status reply_error;
  absl::Status send_error;
  if (call.flow) {
    // The output comes back while the input goes out: a thread reads it, or
    // the server's window would fill and both sides wait on each other.
    std::thread read_thread([&] {
      reply_error = reader.ReadAll(stream.get());
      if (!reply_error.ok()) ctx.TryCancel();
      progress->ReaderDone();
    });
    if (stream->Write(header_buffer)) {
      SendInputs(stream.get(), inputs, chunk_bytes, progress, &send_error);
    }
    if (!send_error.ok()) ctx.TryCancel();
    progress->ReportUntilReaderDone();
    read_thread.join();
  } else {
    if (stream->Write(header_buffer)) {
      SendInputs(stream.get(), inputs, chunk_bytes, progress, &send_error);
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
  for (const StreamedOutput& o : reader.outputs()) {
    if (!o.started) continue;
    *output_started = true;
    // Output already placed is void (a flowing call's bytes come before its status).
    if (!st.ok()) o.sink->Discard();
  }
  return st;
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
  // One deadline and one trace for every attempt.
  const auto deadline = CallDeadline(call);
  const std::string traceparent = Traceparent(call);
  absl::Status st;
  for (int attempt = 1;; ++attempt) {
    bool output_started = false;
    st = StreamAttempt(header_buffer, inputs, call, deadline, traceparent, sink, &progress,
                       &output_started);
    // Sent again only when no server saw it (nothing of it was sent, no
    // output reached the sink): the pick found its only replica's health
    // watch restarting (retry.cc). A stream cut later is not resent: its
    // sink may have passed bytes on, and its progress counted them.
    if (st.ok() || output_started || !NeverSent(st) || !ResendCutAnswer(st, attempt, 0, deadline)) {
      break;
    }
  }
  if (!st.ok()) return st;
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

}  // namespace client_v1
}  // namespace tensorops
