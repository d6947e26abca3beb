// The bytes of a big unary call (Execute, ModelInfer) without protobuf's
// reply copies: the methods are registered raw (grpc::ByteBuffer in and out,
// the same wire format), the request is parsed here from gRPC's slices into
// an arena message, and an output of at least kSliceReplyMinBytes is written
// by the kernel into a buffer of the server's own that goes out as its own
// gRPC slice (the slice owns it and frees it when the transport is done):
// no copy into a protobuf string and again into gRPC's buffer, no zero fill.
// The reply's header (every field but the output bytes) is encoded by
// protobuf; the output's tag and length follow, then the output slice. The
// bytes on the wire are exactly protobuf's: the output bytes are the last
// field protobuf would write (tensorops.v1.Tensor.raw_data of the only
// output; inference.ModelInferResponse.raw_output_contents, field 6, last of
// its message), which the test wire_golden keeps byte-identical.
//
// Smaller outputs go through the response message and are serialised as
// gRPC would (one small slice): a 64 B call costs what it did.
//
// A body that is not a valid protobuf message fails with INVALID_ARGUMENT
// naming the field and byte where it breaks (wire/proto_check.h), through
// the same Call as any other refusal (metrics, access log), after the token
// and drain checks (UnaryCallAllocator::Start).
//
// The call's holder (its buffers, arena messages and Call) is unary_call.h.
//
// Thread-safety: functions are safe from any thread; a SliceBuffer belongs
// to one call.
#ifndef TENSOROPS_SERVER_GRPC_RAW_UNARY_H_
#define TENSOROPS_SERVER_GRPC_RAW_UNARY_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "wire/raw_fields.h"  // AppendLengthDelimited

namespace tensorops {

// Outputs from this size go out as their own slice. Below it, the copy into
// the message costs less than a second slice and its buffer's malloc.
inline constexpr int64_t kSliceReplyMinBytes = int64_t{32} << 10;

// An output buffer (malloc'd, huge pages advised when big, not zeroed) that
// becomes a gRPC slice owning it. Movable.
class SliceBuffer {
 public:
  explicit SliceBuffer(int64_t bytes);
  char* data() { return data_.get(); }
  int64_t size() const { return size_; }
  // A slice of the whole buffer that frees it when gRPC drops its last
  // reference. The SliceBuffer is empty afterwards.
  grpc::Slice Release();

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  int64_t size_ = 0;
};

// Parses `buffer` (a request as gRPC received it) into `message`, reading
// gRPC's slices in place; the buffer is cleared (its slices freed) once
// parsed. Not a valid message: INVALID_ARGUMENT naming the defect; no
// message at all (the call ended before it arrived): CANCELLED.
absl::Status ParseRequest(grpc::ByteBuffer* buffer, google::protobuf::Message* message);

// `message` serialised into `reply` as gRPC's own serialiser does.
absl::Status SerializeReply(const google::protobuf::Message& message, grpc::ByteBuffer* reply);

// `reply` = `header` followed by each of `parts` (for each output: its
// length-delimited key and length are in the header or the part before it).
void SetReply(const std::string& header, std::vector<grpc::Slice> parts, grpc::ByteBuffer* reply);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_RAW_UNARY_H_
