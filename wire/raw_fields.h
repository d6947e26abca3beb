// A message's big bytes fields outside protobuf's own copies, for the unary
// calls' tensors (server/grpc/raw_unary.h, the SDK's Execute):
//  - encoding: a field's key and length as protobuf writes them, so that a
//    message can be sent as protobuf's header bytes followed by the field's
//    bytes in a slice of their own (the same bytes protobuf would write, when
//    the field is the last one the message sets);
//  - decoding: a message read from gRPC's slices (viewed as segments) with
//    the bytes field `inner` of each value of its message field `outer` taken
//    out of what protobuf parses and appended straight from the segments into
//    the parsed message (one copy, no zero fill, no growth).
// Protobuf only, no gRPC (tensorops_wire links none).
//
// Thread-safety: SegmentCursor belongs to one thread; functions are pure.
#ifndef TENSOROPS_WIRE_RAW_FIELDS_H_
#define TENSOROPS_WIRE_RAW_FIELDS_H_

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tensorops {

// Appends a length-delimited field's key (field `number`, wire type 2) and
// `length` to `out`.
void AppendLengthDelimited(int number, uint64_t length, std::string* out);

// Reads a message's bytes held in segments, front to back.
class SegmentCursor {
 public:
  explicit SegmentCursor(std::vector<absl::string_view> segments);

  int64_t remaining() const { return remaining_; }
  // False (cursor anywhere) for a cut-off or over-long varint.
  bool ReadVarint(uint64_t* value);
  // The next `n` bytes appended to `out`; false if fewer remain.
  bool AppendTo(int64_t n, std::string* out);
  // Skips `n` bytes; false if fewer remain.
  bool Skip(int64_t n);

 private:
  // The segment the next byte is in (skipping empty ones).
  void Settle();

  std::vector<absl::string_view> segments_;
  size_t index_ = 0;
  size_t offset_ = 0;  // in segments_[index_]
  int64_t remaining_ = 0;
};

// Parses the `bytes` bytes at `cursor` into `message`; each value of its
// repeated message field number `outer` has its bytes field number `inner`
// (singular: the last value counts, as protobuf's) appended from the
// segments into the parsed value. False if the bytes are not a valid
// message. `outer` and `inner` must be fields of those numbers and types.
bool ParseWithBytesOutside(SegmentCursor* cursor, int64_t bytes, int outer, int inner,
                           google::protobuf::Message* message);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_RAW_FIELDS_H_
