// StreamedExecution (server/stream_execution.h) in-process: the header's
// checks and budget (the output sized by the op's inference), chunk order,
// CRC checks, the kernel and the chunked output, without an RPC.
#include "server/v1/stream_execution.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

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
