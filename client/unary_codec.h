// The unary Execute's bytes without protobuf's copies of the tensors
// (wire/raw_fields.h; the server's side is server/grpc/raw_unary.h):
//  - the request leaves as protobuf's bytes for everything but the big
//    inputs' raw_data, each of which is a gRPC slice of the caller's tensor
//    (an owned tensor's storage in place, held by the slice; a View's bytes
//    copied once, since gRPC may hold a slice past the call's end) - byte for
//    byte what the generated stub sends;
//  - a big reply's raw_data is appended from gRPC's slices into the output
//    tensor's string (one copy, no zero fill); the rest is parsed by protobuf.
// Below kUnaryOutsideMinBytes everything goes through protobuf, as before.
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_CLIENT_UNARY_CODEC_H_
#define TENSOROPS_CLIENT_UNARY_CODEC_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "tensorops/tensor.h"
#include "tensorops/v1/tensorops.pb.h"

namespace tensorops::client_internal {

// Inputs (and replies) from this size skip protobuf's copies.
inline constexpr int64_t kUnaryOutsideMinBytes = int64_t{32} << 10;

// Whether input `t` travels outside the request message (its raw_data left unset).
inline bool SendsOutside(const Tensor& t) {
  return t.dtype() != DataType::kString &&
         static_cast<int64_t>(t.bytes().size()) >= kUnaryOutsideMinBytes;
}

// `request`'s bytes, where outside[i] (null: inline) is the tensor whose bytes
// are inputs[i].raw_data, which `request` leaves unset. `request` is
// restored before return.
grpc::ByteBuffer EncodeExecuteRequest(v1::ExecuteRequest* request,
                                      const std::vector<const Tensor*>& outside);

// Parses a reply's bytes into `response`; INTERNAL for a malformed reply.
absl::Status DecodeExecuteReply(grpc::ByteBuffer* reply, v1::ExecuteResponse* response);

}  // namespace tensorops::client_internal

#endif  // TENSOROPS_CLIENT_UNARY_CODEC_H_
