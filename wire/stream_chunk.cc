#include "wire/stream_chunk.h"

#include <limits>
#include <utility>

namespace tensorops {
namespace {

// Protobuf tags (field number << 3 | wire type) of the one message shape.
constexpr uint8_t kChunkTag = (2 << 3) | 2;   // ExecuteStream{Request,Response}.chunk
constexpr uint8_t kTensorTag = (1 << 3) | 0;  // TensorChunk.tensor, varint
constexpr uint8_t kOffsetTag = (2 << 3) | 0;  // TensorChunk.offset, varint
constexpr uint8_t kDataTag = (3 << 3) | 2;    // TensorChunk.data, length-delimited
constexpr uint8_t kCrcTag = (4 << 3) | 0;     // TensorChunk.crc32, varint

// Reads bytes across a message's slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) remaining_ += static_cast<int64_t>(s.size());
  }

  int64_t remaining() const { return remaining_; }

  bool ReadByte(uint8_t* b) {
    if (remaining_ == 0) return false;
    while (pos_ == slices_[index_].size()) Next();
    *b = slices_[index_].begin()[pos_++];
    --remaining_;
    return true;
  }

  // A base-128 varint of at most 64 bits; anything longer or wider is left
  // to protobuf (false).
  bool ReadVarint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      if (shift == 63 && b > 1) return false;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  }

  // Views the next `n` bytes (n <= remaining()) as pieces of the slices.
  void Take(int64_t n, std::vector<absl::string_view>* pieces) {
    remaining_ -= n;
    while (n > 0) {
      while (pos_ == slices_[index_].size()) Next();
      const grpc::Slice& s = slices_[index_];
      const size_t k = std::min(static_cast<size_t>(n), s.size() - pos_);
      pieces->emplace_back(reinterpret_cast<const char*>(s.begin()) + pos_, k);
      pos_ += k;
      n -= static_cast<int64_t>(k);
    }
  }

 private:
  void Next() {
    ++index_;
    pos_ = 0;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t pos_ = 0;
  int64_t remaining_ = 0;
};

// Appends `v` as a varint.
void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

int VarintSize(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void ReleaseOwner(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

}  // namespace

bool ReadChunkInPlace(const std::vector<grpc::Slice>& slices, ChunkInPlace* chunk) {
  SliceCursor in(slices);
  uint64_t tag = 0;
  uint64_t length = 0;
  if (!in.ReadVarint(&tag) || tag != kChunkTag) return false;
  if (!in.ReadVarint(&length) || length != static_cast<uint64_t>(in.remaining())) return false;
  uint32_t tensor = 0;
  uint64_t offset = 0;
  if (!in.ReadVarint(&tag)) return false;
  if (tag == kTensorTag) {
    uint64_t v = 0;
    // A uint32 field written wider than 32 bits: protobuf truncates; let it.
    if (!in.ReadVarint(&v) || v > std::numeric_limits<uint32_t>::max()) return false;
    tensor = static_cast<uint32_t>(v);
    if (!in.ReadVarint(&tag)) return false;
  }
  if (tag == kOffsetTag) {
    if (!in.ReadVarint(&offset) || !in.ReadVarint(&tag)) return false;
  }
  if (tag != kDataTag) return false;
  uint64_t size = 0;
  if (!in.ReadVarint(&size) || size == 0 || size > static_cast<uint64_t>(in.remaining())) {
    return false;
  }
  chunk->pieces.clear();
  in.Take(static_cast<int64_t>(size), &chunk->pieces);
  // crc32 (field 4) follows `data` when it is not 0; nothing else may.
  uint32_t crc = 0;
  if (in.remaining() > 0) {
    uint64_t v = 0;
    if (!in.ReadVarint(&tag) || tag != kCrcTag || !in.ReadVarint(&v) ||
        v > std::numeric_limits<uint32_t>::max() || in.remaining() != 0) {
      return false;
    }
    crc = static_cast<uint32_t>(v);
  }
  chunk->tensor = tensor;
  chunk->offset = offset;
  chunk->size = static_cast<int64_t>(size);
  chunk->crc32 = crc;
  return true;
}

grpc::ByteBuffer EncodeChunkInPlace(uint32_t tensor, uint64_t offset, absl::string_view data,
                                    std::shared_ptr<const void> owner, uint32_t crc32) {
  const uint64_t n = data.size();
  // crc32 after `data`, in field-number order (left out when 0, as proto3 does).
  std::string suffix;
  if (crc32 != 0) {
    suffix.push_back(static_cast<char>(kCrcTag));
    PutVarint(crc32, &suffix);
  }
  // The chunk message's bytes before `data`, as protobuf writes them (proto3
  // leaves out zero scalars).
  std::string inner;
  if (tensor != 0) {
    inner.push_back(static_cast<char>(kTensorTag));
    PutVarint(tensor, &inner);
  }
  if (offset != 0) {
    inner.push_back(static_cast<char>(kOffsetTag));
    PutVarint(offset, &inner);
  }
  inner.push_back(static_cast<char>(kDataTag));
  PutVarint(n, &inner);
  std::string prefix;
  const uint64_t body = inner.size() + n + suffix.size();
  prefix.reserve(inner.size() + 2 + VarintSize(body));
  prefix.push_back(static_cast<char>(kChunkTag));
  PutVarint(body, &prefix);
  prefix += inner;
  grpc::Slice slices[3] = {grpc::Slice(prefix),
                           // gRPC's slice API takes a mutable pointer; it never writes through it.
                           grpc::Slice(const_cast<char*>(data.data()), data.size(), &ReleaseOwner,
                                       new std::shared_ptr<const void>(std::move(owner))),
                           grpc::Slice(suffix)};
  return grpc::ByteBuffer(slices, suffix.empty() ? 2 : 3);
}

}  // namespace tensorops
