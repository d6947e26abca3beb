#include "wire/raw_fields.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <utility>

namespace tensorops {
namespace {

using google::protobuf::io::CodedOutputStream;

void AppendVarint(uint64_t value, std::string* out) {
  uint8_t buf[10];
  const uint8_t* end = CodedOutputStream::WriteVarint64ToArray(value, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

// A field's key (`tag`) and value, from the cursor to `out` as they were.
// Groups are not supported (no message the callers read has one).
bool CopyField(SegmentCursor* c, uint64_t tag, std::string* out) {
  AppendVarint(tag, out);
  switch (tag & 7) {
    case 0: {
      uint64_t v;
      if (!c->ReadVarint(&v)) return false;
      AppendVarint(v, out);
      return true;
    }
    case 1:
      return c->AppendTo(8, out);
    case 5:
      return c->AppendTo(4, out);
    case 2: {
      uint64_t len;
      if (!c->ReadVarint(&len) || len > static_cast<uint64_t>(c->remaining())) return false;
      AppendVarint(len, out);
      return c->AppendTo(static_cast<int64_t>(len), out);
    }
    default:
      return false;
  }
}

uint64_t LengthDelimitedKey(int number) { return static_cast<uint64_t>(number) << 3 | 2; }

// One value of the outer field (`len` bytes at the cursor): every field but
// `inner` into `*rest`, the last `inner` value's bytes into `*bytes`.
bool SplitValue(SegmentCursor* c, uint64_t len, int inner, std::string* rest, std::string* bytes) {
  if (len > static_cast<uint64_t>(c->remaining())) return false;
  const int64_t end = c->remaining() - static_cast<int64_t>(len);
  while (c->remaining() > end) {
    uint64_t tag;
    if (!c->ReadVarint(&tag)) return false;
    if (tag == LengthDelimitedKey(inner)) {
      uint64_t n;
      if (!c->ReadVarint(&n) || n > static_cast<uint64_t>(c->remaining() - end)) return false;
      bytes->clear();
      bytes->reserve(n);
      if (!c->AppendTo(static_cast<int64_t>(n), bytes)) return false;
    } else if (!CopyField(c, tag, rest)) {
      return false;
    }
    if (c->remaining() < end) return false;  // a field ran past the value
  }
  return true;
}

}  // namespace

void AppendLengthDelimited(int number, uint64_t length, std::string* out) {
  AppendVarint(LengthDelimitedKey(number), out);
  AppendVarint(length, out);
}

SegmentCursor::SegmentCursor(std::vector<absl::string_view> segments)
    : segments_(std::move(segments)) {
  for (absl::string_view s : segments_) remaining_ += static_cast<int64_t>(s.size());
  Settle();
}

void SegmentCursor::Settle() {
  while (index_ < segments_.size() && offset_ == segments_[index_].size()) {
    ++index_;
    offset_ = 0;
  }
}

bool SegmentCursor::ReadVarint(uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && remaining_ > 0; shift += 7) {
    const auto b = static_cast<uint8_t>(segments_[index_][offset_++]);
    --remaining_;
    Settle();
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

bool SegmentCursor::AppendTo(int64_t n, std::string* out) {
  if (n < 0 || n > remaining_) return false;
  remaining_ -= n;
  while (n > 0) {
    const absl::string_view s = segments_[index_];
    const size_t take = std::min<size_t>(static_cast<size_t>(n), s.size() - offset_);
    if (out != nullptr) out->append(s.data() + offset_, take);
    offset_ += take;
    n -= static_cast<int64_t>(take);
    Settle();
  }
  return true;
}

bool SegmentCursor::Skip(int64_t n) { return AppendTo(n, nullptr); }

bool ParseWithBytesOutside(SegmentCursor* cursor, int64_t bytes, int outer, int inner,
                           google::protobuf::Message* message) {
  if (bytes < 0 || bytes > cursor->remaining()) return false;
  const int64_t end = cursor->remaining() - bytes;
  std::string rest;  // the message without the bytes fields, for protobuf
  std::vector<std::string> outside;
  while (cursor->remaining() > end) {
    uint64_t tag;
    if (!cursor->ReadVarint(&tag)) return false;
    if (tag == LengthDelimitedKey(outer)) {
      uint64_t len;
      std::string value;
      std::string& data = outside.emplace_back();
      if (!cursor->ReadVarint(&len) || !SplitValue(cursor, len, inner, &value, &data)) {
        return false;
      }
      AppendLengthDelimited(outer, value.size(), &rest);
      rest += value;
    } else if (!CopyField(cursor, tag, &rest)) {
      return false;
    }
    if (cursor->remaining() < end) return false;
  }
  if (!message->ParseFromString(rest)) return false;
  const google::protobuf::Reflection* reflection = message->GetReflection();
  const google::protobuf::FieldDescriptor* field =
      message->GetDescriptor()->FindFieldByNumber(outer);
  if (field == nullptr ||
      reflection->FieldSize(*message, field) != static_cast<int>(outside.size())) {
    return false;
  }
  for (size_t i = 0; i < outside.size(); ++i) {
    if (outside[i].empty()) continue;
    google::protobuf::Message* value =
        reflection->MutableRepeatedMessage(message, field, static_cast<int>(i));
    const google::protobuf::FieldDescriptor* bytes_field =
        value->GetDescriptor()->FindFieldByNumber(inner);
    if (bytes_field == nullptr) return false;
    value->GetReflection()->SetString(value, bytes_field, std::move(outside[i]));
  }
  return true;
}

}  // namespace tensorops
