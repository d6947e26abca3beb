// Per-request size limits, enforced while a request is decoded (before any
// typed-field copy or output buffer is allocated). The defaults are those of
// tensorops-server's flags (docs/server.md "Limits").
//
// Thread-safety: a plain value type.
#ifndef TENSOROPS_WIRE_LIMITS_H_
#define TENSOROPS_WIRE_LIMITS_H_

#include <cstdint>
#include <limits>

namespace tensorops {

// Constants the server and the client SDK share (the SDK's public header
// repeats the message size as a literal and static_asserts it equal).
//
// The default largest gRPC message: a 256 MiB tensor in raw_data plus room
// for the rest of the message.
inline constexpr int64_t kDefaultMaxMessageBytes = int64_t{272} << 20;
// What an ExecuteStream message needs besides its chunk's bytes (framing,
// indices, offsets): a chunk may be at most the message limit minus this.
inline constexpr int64_t kStreamFramingReserveBytes = int64_t{64} << 10;
// The smallest stream chunk the server accepts as --stream_chunk_bytes.
inline constexpr int64_t kMinStreamChunkBytes = 4096;
// The default (and largest useful) chunk of a streamed tensor.
inline constexpr int64_t kDefaultStreamChunkBytes = int64_t{1} << 20;
// The default window of a flowing ExecuteStream (StreamHeader.flow): what one
// such stream holds at most, whatever its tensor's size. 16 MiB: 16 chunks
// in flight is as fast as 32 here (bench/flow_table.sh), and 8 flowing
// streams then fit the in-flight budget of a 512 MiB container (40%: 205 MiB).
inline constexpr int64_t kDefaultStreamWindowBytes = int64_t{16} << 20;
// The smallest window: room for a chunk being placed, its output and a
// chunk being sent, each up to stream_chunk_bytes.
inline constexpr int64_t kMinStreamWindowChunks = 4;

struct RequestLimits {
  // Rank of any input tensor (NumPy's NPY_MAXDIMS). INVALID_ARGUMENT past it.
  int64_t max_rank = 32;
  // Elements of any one input tensor (2^28: a 256 MiB tensor of 1-byte
  // elements). RESOURCE_EXHAUSTED past it.
  int64_t max_tensor_elements = int64_t{1} << 28;
  // Decoded bytes of any one input tensor (elements x width; STRING counts
  // 16 bytes per element plus its characters). RESOURCE_EXHAUSTED past it.
  int64_t max_tensor_bytes = int64_t{256} << 20;
  // Decoded bytes of all inputs plus the output. RESOURCE_EXHAUSTED past it.
  int64_t max_request_bytes = int64_t{1} << 30;
  // ExecuteStream (tensors past one message; max_rank applies there too):
  // bytes of all inputs plus the output of one call. RESOURCE_EXHAUSTED past it.
  int64_t max_stream_bytes = int64_t{8} << 30;
  // ExecuteStream: the largest chunk accepted, and the size of the chunks sent.
  int64_t stream_chunk_bytes = kDefaultStreamChunkBytes;
  // A flowing ExecuteStream: the bytes it may hold (input being placed,
  // output not yet sent) and what admission counts for it.
  int64_t stream_window_bytes = kDefaultStreamWindowBytes;

  // No limit at all (what the client SDK uses to decode replies).
  static RequestLimits Unlimited() {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    return RequestLimits{kMax, kMax, kMax, kMax, kMax, kMax, kMax};
  }
};

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_LIMITS_H_
