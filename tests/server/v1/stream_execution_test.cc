// StreamedExecution (server/stream_execution.h) in-process: the header's
// checks and budget (the output sized by the op's inference), chunk order,
// CRC checks, the kernel and the chunked output, without an RPC.
#include "server/v1/stream_execution.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "wire/crc32.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

const OpRegistry& Registry() {
  static const OpRegistry* const r = [] {
    auto* registry = new OpRegistry();
    RegisterBuiltinOps(registry);
    return registry;
  }();
  return *r;
}

std::string Int64Bytes(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// Roll of `data` (INT32[n]) by `shift` along axis 0, every input described
// with its true CRC.
struct RollCall {
  std::vector<std::string> inputs;
  v1::StreamHeader header;

  RollCall(const std::vector<int32_t>& data, int64_t shift) {
    inputs = {std::string(reinterpret_cast<const char*>(data.data()), data.size() * 4),
              Int64Bytes(shift), Int64Bytes(0)};
    header.set_op("Roll-7");
    const v1::DataType types[] = {v1::DATA_TYPE_INT32, v1::DATA_TYPE_INT64, v1::DATA_TYPE_INT64};
    for (int i = 0; i < 3; ++i) {
      v1::TensorHeader* h = header.add_inputs();
      h->set_dtype(types[i]);
      if (i == 0) h->add_shape(static_cast<int64_t>(data.size()));
      h->set_crc32(Crc32(0, inputs[i].data(), static_cast<int64_t>(inputs[i].size())));
    }
  }
};

v1::TensorChunk Chunk(uint32_t tensor, uint64_t offset, std::string data) {
  v1::TensorChunk c;
  c.set_tensor(tensor);
  c.set_offset(offset);
  c.set_data(std::move(data));
  return c;
}

RequestLimits SmallChunks() {
  RequestLimits limits;
  limits.stream_chunk_bytes = 8;
  return limits;
}

TEST(StreamedExecutionTest, RollsInChunksAndSendsTheOutputInChunks) {
  const std::vector<int32_t> data = {1, 2, 3, 4, 5};
  RollCall call(data, 2);
  auto exec = StreamedExecution::Begin(Registry(), call.header, SmallChunks());
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->op_name(), "Roll");
  EXPECT_EQ((*exec)->input_bytes(), 20 + 8 + 8);
  EXPECT_EQ((*exec)->output_bytes(), 20);  // the op's inference: data's type and shape
  EXPECT_EQ((*exec)->budget_bytes(), 56);
  // 20 bytes of data in chunks of 8, 8, 4.
  for (uint64_t off = 0; off < 20; off += 8) {
    ASSERT_TRUE((*exec)->AddChunk(Chunk(0, off, call.inputs[0].substr(off, 8))).ok());
  }
  ASSERT_TRUE((*exec)->AddChunk(Chunk(1, 0, call.inputs[1])).ok());
  ASSERT_TRUE((*exec)->AddChunk(Chunk(2, 0, call.inputs[2])).ok());
  EXPECT_EQ((*exec)->received_bytes(), 36);
  ASSERT_TRUE((*exec)->EndOfInput().ok());
  ASSERT_TRUE((*exec)->Run(nullptr, kDefaultMinParallelBytes).ok());
  v1::StreamOutputHeader header;
  (*exec)->FillOutputHeader(&header);
  ASSERT_EQ(header.outputs_size(), 1);
  EXPECT_EQ(header.outputs(0).dtype(), v1::DATA_TYPE_INT32);
  EXPECT_THAT(header.outputs(0).shape(), ::testing::ElementsAre(5));
  std::string out;
  v1::TensorChunk chunk;
  int chunks = 0;
  while ((*exec)->NextChunk(&chunk)) {
    EXPECT_EQ(chunk.offset(), out.size());
    EXPECT_LE(chunk.data().size(), 8u);
    out += chunk.data();
    ++chunks;
  }
  EXPECT_EQ(chunks, 3);
  std::vector<int32_t> rolled(5);
  ASSERT_EQ(out.size(), 20u);
  std::memcpy(rolled.data(), out.data(), 20);
  EXPECT_THAT(rolled, ::testing::ElementsAre(4, 5, 1, 2, 3));
  EXPECT_EQ(header.outputs(0).crc32(), Crc32(0, out.data(), 20));
}

// A streamed call's bytes (inputs in header order) and its header.
struct Streamed {
  v1::StreamHeader header;
  std::vector<std::string> inputs;
};

Streamed RollOf(const std::string& data, int64_t rows, int64_t shift, bool flow) {
  Streamed s;
  s.inputs = {data, Int64Bytes(shift), Int64Bytes(0)};
  s.header.set_op("Roll");
  s.header.set_flow(flow);
  const v1::DataType types[] = {v1::DATA_TYPE_UINT8, v1::DATA_TYPE_INT64, v1::DATA_TYPE_INT64};
  for (int i = 0; i < 3; ++i) {
    v1::TensorHeader* h = s.header.add_inputs();
    h->set_dtype(types[i]);
    if (i == 0) {
      h->add_shape(rows);
      h->add_shape(static_cast<int64_t>(data.size()) / rows);
    }
    h->set_crc32(Crc32(0, s.inputs[i].data(), static_cast<int64_t>(s.inputs[i].size())));
  }
  return s;
}

// A flowing call fed in order (small inputs first, then the data in
// `chunk`-byte chunks): the output assembled from its chunks by offset, each
// byte once, each chunk's CRC checked, and the trailer's CRC.
struct Flowed {
  absl::Status status;
  std::string output;
  int64_t most_held = 0;
  uint32_t trailer_crc = 0;
};

Flowed Flow(const Streamed& call, const RequestLimits& limits) {
  Flowed f;
  auto exec = StreamedExecution::Begin(Registry(), call.header, limits);
  if (!exec.ok()) {
    f.status = exec.status();
    return f;
  }
  f.output.assign(static_cast<size_t>((*exec)->output_bytes()), '\0');
  std::vector<int> written(f.output.size(), 0);
  std::vector<StreamedExecution::OutputChunk> out;
  auto add = [&](uint32_t i, uint64_t off, absl::string_view piece) {
    out.clear();
    absl::Status s = (*exec)->AddChunk(i, off, absl::MakeConstSpan(&piece, 1), 0, &out);
    f.most_held = std::max(f.most_held, (*exec)->held_bytes());
    for (const StreamedExecution::OutputChunk& c : out) {
      EXPECT_EQ(c.crc32, Crc32(0, c.data.data(), static_cast<int64_t>(c.data.size())));
      EXPECT_LE(static_cast<int64_t>(c.data.size()), limits.stream_chunk_bytes);
      f.output.replace(c.offset, c.data.size(), c.data.data(), c.data.size());
      for (size_t k = 0; k < c.data.size(); ++k) ++written[c.offset + k];
    }
    return s;
  };
  for (size_t i = call.inputs.size(); i-- > 0;) {  // the data (input 0) last
    const std::string& in = call.inputs[i];
    for (size_t off = 0; off < in.size() && f.status.ok(); off += limits.stream_chunk_bytes) {
      f.status = add(static_cast<uint32_t>(i), off,
                     absl::string_view(in).substr(off, limits.stream_chunk_bytes));
    }
  }
  if (f.status.ok()) f.status = (*exec)->EndOfInput();
  if (!f.status.ok()) return f;
  EXPECT_FALSE((*exec)->buffered());
  for (size_t k = 0; k < written.size(); ++k) EXPECT_EQ(written[k], 1) << "output byte " << k;
  f.trailer_crc = (*exec)->flow_output_crc();
  return f;
}

std::string NonFlowing(const Streamed& call, const RequestLimits& limits) {
  Streamed plain = call;
  plain.header.set_flow(false);
  RequestLimits one_chunk = limits;  // each input in one chunk
  one_chunk.stream_chunk_bytes = limits.max_stream_bytes;
  auto exec = StreamedExecution::Begin(Registry(), plain.header, one_chunk);
  EXPECT_TRUE(exec.ok()) << exec.status();
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.inputs[i].empty()) {
      EXPECT_TRUE((*exec)->AddChunk(Chunk(static_cast<uint32_t>(i), 0, call.inputs[i])).ok());
    }
  }
  EXPECT_TRUE((*exec)->EndOfInput().ok());
  EXPECT_TRUE((*exec)->Run(nullptr, kDefaultMinParallelBytes).ok());
  std::string out;
  v1::TensorChunk chunk;
  while ((*exec)->NextChunk(&chunk)) out += chunk.data();
  return out;
}

TEST(StreamedExecutionTest, AFlowingRollIsTheNonFlowingOneInBoundedMemory) {
  RequestLimits limits;
  limits.stream_chunk_bytes = 4096;
  limits.stream_window_bytes = 4 * 4096;
  limits.max_stream_bytes = int64_t{1} << 30;
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4099);
  for (const auto& [rows, shift] : std::vector<std::pair<int64_t, int64_t>>{
           {3 << 10, 5}, {3 << 10, -1000}, {1, 12345}, {3 << 20, 1}}) {
    SCOPED_TRACE(absl::StrCat(rows, " rows, shift ", shift));
    const Streamed call = RollOf(data, rows, shift, true);
    const Flowed f = Flow(call, limits);
    ASSERT_TRUE(f.status.ok()) << f.status;
    EXPECT_TRUE(f.output == NonFlowing(call, limits));
    EXPECT_EQ(f.trailer_crc, Crc32(0, f.output.data(), static_cast<int64_t>(f.output.size())));
    // Held: at most a block (<= a chunk) waiting for its end, plus a chunk.
    EXPECT_LE(f.most_held, 2 * limits.stream_chunk_bytes);
  }
  auto exec = StreamedExecution::Begin(Registry(), RollOf(data, 3, 1, true).header, limits);
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ((*exec)->budget_bytes(), limits.stream_window_bytes + 16);  // window + shift, axes
}

// Data before the small inputs (api.md: that only delays the first output):
// held up to the window, then the call is kept whole, as a layout that does
// not flow, and gives the same output; past --max_stream_bytes it is refused.
TEST(StreamedExecutionTest, FlowingDataBeforeTheSmallInputsIsHeldThenBufferedWhole) {
  RequestLimits limits;
  limits.stream_chunk_bytes = 4096;
  limits.stream_window_bytes = 4 * 4096;
  limits.max_stream_bytes = int64_t{1} << 20;
  std::string data(64 << 10, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4099);
  const Streamed call = RollOf(data, 16, 1, true);
  auto exec = StreamedExecution::Begin(Registry(), call.header, limits);
  ASSERT_TRUE(exec.ok());
  std::vector<StreamedExecution::OutputChunk> out;
  auto add = [&](uint32_t i, int64_t off, absl::string_view piece) {
    return (*exec)->AddChunk(i, static_cast<uint64_t>(off), absl::MakeConstSpan(&piece, 1), 0,
                             &out);
  };
  for (int64_t off = 0; off < 64 << 10; off += 4096) {
    ASSERT_TRUE(add(0, off, absl::string_view(data).substr(off, 4096)).ok()) << off;
    // Held within the window while it waits; buffered from the fifth chunk.
    EXPECT_EQ((*exec)->buffered(), off >= 4 * 4096) << off;
    EXPECT_LE((*exec)->held_bytes(), limits.stream_window_bytes);
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ((*exec)->budget_bytes(), 2 * (64 << 10) + 16);  // what the door admits again
  ASSERT_TRUE(add(1, 0, call.inputs[1]).ok());
  ASSERT_TRUE(add(2, 0, call.inputs[2]).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE((*exec)->EndOfInput().ok());
  ASSERT_TRUE((*exec)->Run(nullptr, kDefaultMinParallelBytes).ok());
  std::string got;
  uint64_t offset = 0;
  absl::string_view piece;
  while ((*exec)->NextChunk(&offset, &piece)) got.append(piece.data(), piece.size());
  EXPECT_TRUE(got == NonFlowing(call, limits));
  EXPECT_EQ((*exec)->flow_output_crc(), Crc32(0, got.data(), static_cast<int64_t>(got.size())));

  // Buffered whole it must fit --max_stream_bytes (inputs + output).
  limits.max_stream_bytes = 100 << 10;
  exec = StreamedExecution::Begin(Registry(), call.header, limits);
  ASSERT_TRUE(exec.ok());
  absl::Status s;
  int64_t off = 0;
  for (; off < 64 << 10 && s.ok(); off += 4096) {
    s = add(0, off, absl::string_view(data).substr(off, 4096));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("--stream_window_bytes"));
  EXPECT_THAT(s.message(), HasSubstr("--max_stream_bytes"));
  EXPECT_EQ(off, 5 * 4096);  // the fifth chunk would pass the window
}

TEST(StreamedExecutionTest, AFlowingTensorIsNotCappedByMaxStreamBytes) {
  // 16 GiB of UINT8 [16 Gi / 1024, 1024] with the default limits (8 GiB):
  // flowing, only the window is held, so only it is budgeted.
  RequestLimits limits;
  Streamed call = RollOf(std::string(1024, 'a'), 1, 1, true);
  call.header.mutable_inputs(0)->set_shape(0, int64_t{16} << 20);
  auto exec = StreamedExecution::Begin(Registry(), call.header, limits);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->budget_bytes(), limits.stream_window_bytes + 16);
  // Not flowing: refused as before.
  call.header.set_flow(false);
  EXPECT_EQ(StreamedExecution::Begin(Registry(), call.header, limits).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(StreamedExecutionTest, FlowingChunkCrcsAreChecked) {
  RequestLimits limits;
  const Streamed call = RollOf(std::string(100, 'a'), 1, 1, true);
  auto exec = StreamedExecution::Begin(Registry(), call.header, limits);
  ASSERT_TRUE(exec.ok());
  std::vector<StreamedExecution::OutputChunk> out;
  const absl::string_view shift = call.inputs[1];
  EXPECT_TRUE((*exec)
                  ->AddChunk(1, 0, absl::MakeConstSpan(&shift, 1), Crc32(0, shift.data(), 8), &out)
                  .ok());
  const absl::string_view data = call.inputs[0];
  absl::Status s = (*exec)->AddChunk(0, 0, absl::MakeConstSpan(&data, 1), 12345, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("at offset 0 is corrupt"));
}

TEST(StreamedExecutionTest, TimeMajorSequencesOverTinyRowsAreBuffered) {
  // onnx.ReverseSequence's default layout [time, batch] over one-byte
  // elements: each output piece would be one byte; the call is buffered.
  RequestLimits limits;
  v1::StreamHeader header;
  header.set_op("onnx.ReverseSequence");
  header.set_flow(true);
  const std::string data(4 * 1000, 'q');
  std::vector<int64_t> lengths(4, 3);
  const std::string lens(reinterpret_cast<const char*>(lengths.data()), 32);
  v1::TensorHeader* h = header.add_inputs();
  h->set_dtype(v1::DATA_TYPE_UINT8);
  h->add_shape(1000);
  h->add_shape(4);
  h->set_crc32(Crc32(0, data.data(), 4000));
  h = header.add_inputs();
  h->set_dtype(v1::DATA_TYPE_INT64);
  h->add_shape(4);
  h->set_crc32(Crc32(0, lens.data(), 32));
  auto exec = StreamedExecution::Begin(Registry(), header, limits);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_FALSE((*exec)->buffered());
  std::vector<StreamedExecution::OutputChunk> out;
  const absl::string_view l = lens;
  ASSERT_TRUE((*exec)->AddChunk(1, 0, absl::MakeConstSpan(&l, 1), 0, &out).ok());
  EXPECT_TRUE((*exec)->buffered());
  EXPECT_EQ((*exec)->budget_bytes(), 4000 + 32 + 4000);
  // Buffered whole, it is held to --max_stream_bytes when the plan declines it.
  limits.max_stream_bytes = 8000;
  exec = StreamedExecution::Begin(Registry(), header, limits);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const absl::Status s = (*exec)->AddChunk(1, 0, absl::MakeConstSpan(&l, 1), 0, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("--max_stream_bytes"));
}

TEST(StreamedExecutionTest, ChunkAndEndOfInputErrorsNameTheInput) {
  const std::vector<int32_t> data = {1, 2, 3, 4};
  RollCall call(data, 1);
  struct Row {
    const char* name;
    std::vector<v1::TensorChunk> chunks;
    absl::StatusCode code;  // of the failing AddChunk, or of EndOfInput
    const char* message;
  };
  std::string corrupt = call.inputs[0];
  corrupt[0] ^= 1;
  const std::vector<Row> rows = {
      {"gap",
       {Chunk(0, 8, call.inputs[0].substr(8))},
       absl::StatusCode::kInvalidArgument,
       "at offset 8, expected offset 0"},
      {"past the end",
       {Chunk(0, 0, call.inputs[0].substr(0, 8)), Chunk(0, 8, std::string(9, 'x'))},
       absl::StatusCode::kInvalidArgument,
       "exceeds the limit of 8 bytes"},
      {"unknown tensor",
       {Chunk(3, 0, "x")},
       absl::StatusCode::kInvalidArgument,
       "chunk.tensor is 3 but the header has 3 inputs"},
      {"short",
       {Chunk(0, 0, call.inputs[0].substr(0, 8))},
       absl::StatusCode::kInvalidArgument,
       "stream ended after 8 of 16 bytes of inputs[0] ('data')"},
      {"corrupt",
       {Chunk(0, 0, corrupt.substr(0, 8)), Chunk(0, 8, corrupt.substr(8)),
        Chunk(1, 0, call.inputs[1]), Chunk(2, 0, call.inputs[2])},
       absl::StatusCode::kDataLoss,
       "inputs[0] ('data') is corrupt"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    auto exec = StreamedExecution::Begin(Registry(), call.header, SmallChunks());
    ASSERT_TRUE(exec.ok()) << exec.status();
    absl::Status status;
    for (const v1::TensorChunk& c : row.chunks) {
      status = (*exec)->AddChunk(c);
      if (!status.ok()) break;
    }
    if (status.ok()) status = (*exec)->EndOfInput();
    EXPECT_EQ(status.code(), row.code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(row.message));
  }
}

TEST(StreamedExecutionTest, TheInferredOutputCountsAgainstMaxStreamBytes) {
  const std::vector<int32_t> data(100, 7);
  RollCall call(data, 1);
  RequestLimits limits;
  // Inputs (400 + 16 bytes) fit; inputs plus the inferred 400-byte output do not.
  limits.max_stream_bytes = 416 + 399;
  auto exec = StreamedExecution::Begin(Registry(), call.header, limits);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(exec.status().message()),
              HasSubstr("output[0] is 400 bytes, shape [100] of INT32"));
  limits.max_stream_bytes = 416 + 400;
  EXPECT_TRUE(StreamedExecution::Begin(Registry(), call.header, limits).ok());
  // The header's own errors come first.
  call.header.set_op("NoSuchOp");
  EXPECT_EQ(StreamedExecution::Begin(Registry(), call.header, limits).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tensorops
