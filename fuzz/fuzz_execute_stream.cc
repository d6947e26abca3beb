// libFuzzer target C: the ExecuteStream request path (server/stream_execution.h)
// fed a sequence of ExecuteStreamRequest messages, each framed by a 2-byte
// little-endian length, exactly as the reactor feeds it: the first must be a
// header, the rest chunks, then the end of input, the op, and the output in
// chunks. Limits are small (1 MiB per call, 4 KiB chunks) so the fuzzer
// explores protocol states rather than allocations.
// Chunks go in and out as the reactor moves them: each chunk's bytes, cut
// into two slices, through the in-place reader (wire/stream_chunk.h), and
// the output through the in-place writer.
// Properties checked: what the in-place reader accepts, protobuf parses to
// the same chunk; on success, the output chunks (parsed back by protobuf)
// cover the output once, in order, and their CRC-32 equals the output
// header's; and the result is the one Execute gives for the same tensors
// sent in one message.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kernels/op_registry.h"
#include "server/v1/execution.h"
#include "server/v1/stream_execution.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/stream_chunk.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  tensorops::fuzz::PropertyViolated("fuzz_execute_stream", what);
}

using tensorops::fuzz::Registry;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tensorops::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<tensorops::v1::ExecuteStreamRequest> messages;
  std::vector<std::vector<grpc::Slice>> frames;  // each message's bytes in two slices
  for (size_t pos = 0; pos + 2 <= size && messages.size() < 256;) {
    const size_t len = data[pos] | (size_t{data[pos + 1]} << 8);
    pos += 2;
    if (len > size - pos) break;
    tensorops::v1::ExecuteStreamRequest m;
    if (!m.ParseFromArray(data + pos, static_cast<int>(len))) return 0;
    messages.push_back(std::move(m));
    const size_t cut = len == 0 ? 0 : data[pos] % (len + 1);
    frames.push_back({grpc::Slice(data + pos, cut), grpc::Slice(data + pos + cut, len - cut)});
    pos += len;
  }
  if (messages.empty() || !messages[0].has_header()) return 0;

  tensorops::RequestLimits limits;
  limits.max_rank = 8;
  limits.max_stream_bytes = int64_t{1} << 20;
  limits.stream_chunk_bytes = 4096;
  // The non-flowing path (its output after Run, checked against Execute
  // below); flowing streams are covered by tests/e2e/flow_stream_test.cc.
  tensorops::v1::StreamHeader stream_header = messages[0].header();
  stream_header.set_flow(false);
  auto exec = tensorops::StreamedExecution::Begin(Registry(), stream_header, limits);
  if (!exec.ok()) return 0;
  // What the client sent, per input, to replay through Execute.
  std::vector<std::string> sent(messages[0].header().inputs_size());
  for (size_t i = 1; i < messages.size(); ++i) {
    if (!messages[i].has_chunk()) return 0;  // the reactor ends the call here too
    const auto& chunk = messages[i].chunk();
    tensorops::ChunkInPlace in_place;
    if (tensorops::ReadChunkInPlace(frames[i], &in_place)) {
      std::string joined;
      for (absl::string_view p : in_place.pieces) joined.append(p.data(), p.size());
      if (in_place.tensor != chunk.tensor() || in_place.offset != chunk.offset() ||
          joined != chunk.data() || in_place.size != static_cast<int64_t>(joined.size()) ||
          in_place.crc32 != chunk.crc32()) {
        Fail("the in-place chunk reader disagrees with protobuf");
      }
      if (!(*exec)->AddChunk(in_place.tensor, in_place.offset, in_place.pieces).ok()) return 0;
    } else if (!(*exec)->AddChunk(chunk).ok()) {
      return 0;
    }
    sent[chunk.tensor()] += chunk.data();
  }
  if (!(*exec)->EndOfInput().ok()) return 0;
  const absl::Status run = (*exec)->Run(nullptr, int64_t{1} << 20);

  // The same call as one Execute message.
  tensorops::v1::ExecuteRequest unary;
  unary.set_op(messages[0].header().op());
  *unary.mutable_attrs() = messages[0].header().attrs();
  for (int i = 0; i < messages[0].header().inputs_size(); ++i) {
    const auto& h = messages[0].header().inputs(i);
    tensorops::v1::Tensor* t = unary.add_inputs();
    t->set_dtype(h.dtype());
    *t->mutable_shape() = h.shape();
    t->set_raw_data(sent[i]);
  }
  tensorops::v1::ExecuteResponse expected;
  const absl::Status unary_status = tensorops::Execute(Registry(), unary, &expected);
  if (run.ok() != unary_status.ok()) Fail("ExecuteStream and Execute disagree on success");
  if (!run.ok()) {
    if (run.code() != unary_status.code()) Fail("ExecuteStream and Execute disagree on the code");
    return 0;
  }

  tensorops::v1::StreamOutputHeader header;
  (*exec)->FillOutputHeader(&header);
  if (header.outputs_size() != 1) Fail("not exactly one output header");
  std::string output;
  uint64_t offset = 0;
  absl::string_view piece;
  while ((*exec)->NextChunk(&offset, &piece)) {
    const grpc::ByteBuffer buffer =
        tensorops::EncodeChunkInPlace(0, offset, piece, (*exec)->output_owner());
    std::vector<grpc::Slice> slices;
    if (!buffer.Dump(&slices).ok()) Fail("an output chunk's buffer cannot be read");
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    tensorops::v1::ExecuteStreamResponse response;
    if (!response.ParseFromString(bytes) || !response.has_chunk()) {
      Fail("an output chunk written in place is not an ExecuteStreamResponse chunk");
    }
    const tensorops::v1::TensorChunk& chunk = response.chunk();
    if (chunk.tensor() != 0) Fail("output chunk for another tensor");
    if (chunk.offset() != output.size()) Fail("output chunk out of order");
    if (chunk.data().empty() ||
        static_cast<int64_t>(chunk.data().size()) > limits.stream_chunk_bytes) {
      Fail("output chunk empty or past the chunk size");
    }
    output += chunk.data();
  }
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(output.data()), output.size()));
  if (crc != header.outputs(0).crc32()) Fail("output CRC-32 differs from the header's");
  const auto& want = expected.outputs(0);
  if (header.outputs(0).dtype() != want.dtype()) Fail("dtype differs from Execute's");
  if (header.outputs(0).shape_size() != want.shape_size()) Fail("rank differs from Execute's");
  for (int i = 0; i < want.shape_size(); ++i) {
    if (header.outputs(0).shape(i) != want.shape(i)) Fail("shape differs from Execute's");
  }
  if (output != want.raw_data()) Fail("bytes differ from Execute's");
  return 0;
}
