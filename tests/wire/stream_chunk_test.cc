// wire/stream_chunk.h: chunks read and written in place agree byte for byte
// with protobuf's generated classes, the reader declines (false) every
// message it does not fully understand, and an output chunk's slice keeps
// its owner alive exactly as long as gRPC holds it.
#include "wire/stream_chunk.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.pb.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

// `bytes` cut into slices at the given positions.
std::vector<grpc::Slice> Cut(const std::string& bytes, std::vector<size_t> cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  cuts.push_back(bytes.size());
  for (size_t c : cuts) {
    c = std::min(std::max(c, at), bytes.size());
    slices.emplace_back(bytes.data() + at, c - at);
    at = c;
  }
  return slices;
}

std::string Joined(const ChunkInPlace& c) {
  std::string s;
  for (absl::string_view p : c.pieces) s.append(p.data(), p.size());
  return s;
}

std::string Serialized(uint32_t tensor, uint64_t offset, const std::string& data,
                       uint32_t crc32 = 0) {
  v1::ExecuteStreamRequest m;
  m.mutable_chunk()->set_tensor(tensor);
  m.mutable_chunk()->set_offset(offset);
  m.mutable_chunk()->set_data(data);
  m.mutable_chunk()->set_crc32(crc32);
  return m.SerializeAsString();
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string s;
  for (const grpc::Slice& sl : slices)
    s.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return s;
}

TEST(StreamChunkTest, ReadsWhatProtobufWritesAcrossAnySlicing) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
  for (const uint32_t tensor : {0u, 1u, 2u, 127u, 128u, 0xffffffffu}) {
    for (const uint64_t offset :
         {uint64_t{0}, uint64_t{1}, uint64_t{1} << 20, ~uint64_t{0}, uint64_t{300}}) {
      for (const size_t n : {size_t{1}, size_t{127}, size_t{128}, size_t{70000}}) {
        std::string data(n, '\0');
        for (char& c : data) c = static_cast<char>(rng());
        // A flowing stream's chunks carry a CRC-32 after the data; others none.
        const uint32_t crc = n == 127 ? 0 : static_cast<uint32_t>(rng());
        const std::string bytes = Serialized(tensor, offset, data, crc);
        for (int trial = 0; trial < 8; ++trial) {
          // Cuts anywhere, including inside tags and varints, and empty slices.
          std::vector<size_t> cuts;
          for (int k = 0; k < trial; ++k) cuts.push_back(rng() % (bytes.size() + 1));
          std::sort(cuts.begin(), cuts.end());
          ChunkInPlace chunk;  // views into `slices`
          const std::vector<grpc::Slice> slices = Cut(bytes, cuts);
          ASSERT_TRUE(ReadChunkInPlace(slices, &chunk))
              << tensor << " " << offset << " " << n << " trial " << trial;
          EXPECT_EQ(chunk.tensor, tensor);
          EXPECT_EQ(chunk.offset, offset);
          EXPECT_EQ(chunk.size, static_cast<int64_t>(n));
          EXPECT_EQ(chunk.crc32, crc);
          EXPECT_EQ(Joined(chunk), data);
        }
      }
    }
  }
}

TEST(StreamChunkTest, DeclinesWhatItDoesNotFullyUnderstand) {
  auto declines = [](const std::string& bytes) {
    ChunkInPlace chunk;
    return !ReadChunkInPlace(Cut(bytes, {bytes.size() / 2}), &chunk);
  };
  v1::ExecuteStreamRequest header;
  header.mutable_header()->set_op("Roll");
  EXPECT_TRUE(declines(header.SerializeAsString()));
  EXPECT_TRUE(declines(""));
  EXPECT_TRUE(declines(Serialized(0, 5, "")));  // empty data: protobuf omits the field
  const std::string good = Serialized(1, 2, "abc");
  EXPECT_FALSE(declines(good));
  EXPECT_TRUE(declines(good.substr(0, good.size() - 1)));  // truncated
  EXPECT_TRUE(declines(good + "x"));                       // trailing byte
  EXPECT_TRUE(declines(good + good));                      // two chunks: protobuf merges them
  // data before offset (valid protobuf, unusual order).
  EXPECT_TRUE(
      declines(std::string("\x12\x07\x1a\x03"
                           "abc\x10\x02",
                           9)));
  // An unknown field after data.
  EXPECT_TRUE(
      declines(std::string("\x12\x07\x1a\x03"
                           "abc\x28\x01",
                           9)));
  // crc32 after data is understood; crc32 twice, or wider than 32 bits, is not.
  EXPECT_FALSE(
      declines(std::string("\x12\x07\x1a\x03"
                           "abc\x20\x01",
                           9)));
  EXPECT_TRUE(
      declines(std::string("\x12\x09\x1a\x03"
                           "abc\x20\x01\x20\x02",
                           11)));
  EXPECT_TRUE(
      declines(std::string("\x12\x0b\x1a\x03"
                           "abc\x20\x80\x80\x80\x80\x10",
                           13)));
  // tensor wider than 32 bits (protobuf truncates it).
  EXPECT_TRUE(
      declines(std::string("\x12\x0b\x08\x80\x80\x80\x80\x10\x1a\x03"
                           "abc",
                           13)));
  // An 11-byte varint.
  EXPECT_TRUE(declines(std::string("\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12)));
  // A length that claims more than the message has.
  EXPECT_TRUE(
      declines(std::string("\x12\x09\x1a\x07"
                           "abc",
                           7)));

  // Whatever it accepts of randomly damaged messages, protobuf reads the same.
  std::mt19937_64 rng(::tensorops::testing::TestSeed(2));
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = Serialized(rng() % 3, rng() % 1000, std::string(1 + rng() % 20, 'z'),
                                   rng() % 2 == 0 ? 0 : static_cast<uint32_t>(rng()));
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    ChunkInPlace chunk;
    const std::vector<grpc::Slice> slices = Cut(bytes, {rng() % (bytes.size() + 1)});
    if (!ReadChunkInPlace(slices, &chunk)) continue;
    ++accepted;
    v1::ExecuteStreamRequest m;
    ASSERT_TRUE(m.ParseFromString(bytes)) << i;
    ASSERT_TRUE(m.has_chunk()) << i;
    EXPECT_EQ(m.chunk().tensor(), chunk.tensor) << i;
    EXPECT_EQ(m.chunk().offset(), chunk.offset) << i;
    EXPECT_EQ(m.chunk().data(), Joined(chunk)) << i;
    EXPECT_EQ(m.chunk().crc32(), chunk.crc32) << i;
  }
  EXPECT_GT(accepted, 1000);  // the damage hit the data bytes often enough
}

TEST(StreamChunkTest, WritesWhatProtobufWrites) {
  for (const uint32_t tensor : {0u, 3u, 0xffffffffu}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1} << 20, ~uint64_t{0}}) {
      for (const size_t n : {size_t{1}, size_t{200}, size_t{1} << 20}) {
        for (const uint32_t crc : {0u, 1u, 0xdeadbeefu}) {
          auto data = std::make_shared<std::string>(n, 'q');
          const grpc::ByteBuffer buffer = EncodeChunkInPlace(tensor, offset, *data, data, crc);
          v1::ExecuteStreamResponse expected;
          expected.mutable_chunk()->set_tensor(tensor);
          expected.mutable_chunk()->set_offset(offset);
          expected.mutable_chunk()->set_data(*data);
          expected.mutable_chunk()->set_crc32(crc);
          EXPECT_EQ(Flatten(buffer), expected.SerializeAsString())
              << tensor << " " << offset << " " << crc;
        }
      }
    }
  }
}

TEST(StreamChunkTest, TheOutputChunkPointsIntoItsOwnerAndKeepsItAlive) {
  auto data = std::make_shared<std::string>(4096, 'w');
  std::weak_ptr<std::string> watch = data;
  const char* memory = data->data();
  {
    grpc::ByteBuffer buffer = EncodeChunkInPlace(0, 0, *data, data);
    data.reset();
    EXPECT_FALSE(watch.expired());  // the slice holds it
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), memory);  // no copy
    buffer.Clear();
    EXPECT_FALSE(watch.expired());  // `slices` still refer to it
  }
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace tensorops
