// ExecuteStream's chunk messages read and written in place, so a streamed
// tensor's bytes are copied once on the way in (from gRPC's receive slices
// straight into the tensor) and not at all on the way out (the outgoing
// chunk's slice points into the tensor). The server uses both for its inputs
// and output; the SDK for its output and (owned) inputs.
//
// The generated code would copy every chunk twice each way: a received
// message is parsed into a std::string and then copied into the tensor; an
// outgoing chunk is copied into a message and serialised into new slices.
// This file knows the protobuf encoding of exactly one message shape, which
// ExecuteStreamRequest and ExecuteStreamResponse share:
//   { chunk (2) = TensorChunk { tensor (1, varint), offset (2, varint),
//                               data (3, bytes), crc32 (4, varint) } }
// and leaves every other message (headers, unusual but valid encodings) to
// protobuf, so the wire contract is still the .proto's.
//
// Thread-safety: pure functions.
#ifndef TENSOROPS_WIRE_STREAM_CHUNK_H_
#define TENSOROPS_WIRE_STREAM_CHUNK_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"

namespace tensorops {

// A TensorChunk as it lies in the received slices: `pieces` view `data` in
// order without copying it (valid while the slices live).
struct ChunkInPlace {
  uint32_t tensor = 0;
  uint64_t offset = 0;
  int64_t size = 0;    // bytes of `data`, the sum of the pieces' sizes
  uint32_t crc32 = 0;  // TensorChunk.crc32 (0: not set)
  std::vector<absl::string_view> pieces;
};

// Reads one serialised ExecuteStreamRequest or ExecuteStreamResponse (its
// bytes are `slices`, in order). True, with `chunk` filled, when the message is a single non-empty
// `chunk` whose fields come in field-number order, each once, `data` last but for `crc32`:
// what every protobuf serialiser writes. False for anything else (a header,
// an empty chunk, repeated or reordered fields, unknown fields, malformed
// bytes): the caller parses those with protobuf, which decides what they
// mean. Never reads past the slices.
//
// Example:
//   std::vector<grpc::Slice> slices;
//   if (buffer.Dump(&slices).ok() && ReadChunkInPlace(slices, &chunk)) ...
bool ReadChunkInPlace(const std::vector<grpc::Slice>& slices, ChunkInPlace* chunk);

// An ExecuteStreamRequest or ExecuteStreamResponse (the same bytes) holding
// chunk {tensor, offset, data, crc32} whose `data` slice points into `data`'s memory: `owner`
// (which keeps that memory alive) is held until gRPC releases the slice, which may be after the
// write completes. crc32 0 is left out (proto3's default).
grpc::ByteBuffer EncodeChunkInPlace(uint32_t tensor, uint64_t offset, absl::string_view data,
                                    std::shared_ptr<const void> owner, uint32_t crc32 = 0);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_STREAM_CHUNK_H_
