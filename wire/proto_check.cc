#include "wire/proto_check.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"

namespace tensorops {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// protobuf's default recursion limit: a deeper body does not parse.
constexpr int kMaxDepth = 100;

bool ReadVarint(const char** p, const char* end, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

// Structural UTF-8 (no overlongs, no surrogates, at most U+10FFFF), which
// protobuf requires of proto3 strings.
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // cut off
    for (int k = 1; k <= n; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

class Walker {
 public:
  Walker(const Descriptor* root, absl::string_view bytes) : root_(root), base_(bytes.data()) {}

  // Walks [*p, end) as `type` (nullptr: an unknown group's fields). Inside a
  // group (`group` > 0) the walk ends at its end-group tag.
  absl::Status Walk(const Descriptor* type, const std::string& path, const char** p,
                    const char* end, int depth, int group) {
    if (depth > kMaxDepth) {
      return Fail(path, 0, *p, absl::StrCat("nests deeper than ", kMaxDepth, " messages"));
    }
    absl::flat_hash_map<int, int> seen;  // repeated fields' next index
    while (*p < end) {
      const char* at = *p;
      uint64_t tag = 0;
      if (!ReadVarint(p, end, &tag) || tag > UINT32_MAX) {
        return Fail(path, 0, at, "a field's tag is cut off or longer than 5 bytes");
      }
      const int number = static_cast<int>(tag >> 3);
      const int wire_type = static_cast<int>(tag & 7);
      if (number == 0) return Fail(path, 0, at, "field number 0 is not valid");
      const FieldDescriptor* field = type == nullptr ? nullptr : type->FindFieldByNumber(number);
      std::string field_path = path;
      if (field != nullptr) {
        absl::StrAppend(&field_path, path.empty() ? "" : ".", field->name());
        if (field->is_repeated()) absl::StrAppend(&field_path, "[", seen[number]++, "]");
      }
      switch (wire_type) {
        case 0: {
          uint64_t v;
          if (!ReadVarint(p, end, &v)) return Fail(field_path, number, at, "its varint is cut off");
          break;
        }
        case 1:
        case 5: {
          const int width = wire_type == 1 ? 8 : 4;
          if (end - *p < width) {
            return Fail(field_path, number, at,
                        absl::StrCat("needs ", width, " bytes; ", end - *p, " are left"));
          }
          *p += width;
          break;
        }
        case 2: {
          uint64_t len;
          if (!ReadVarint(p, end, &len)) {
            return Fail(field_path, number, at, "its length is cut off");
          }
          if (len > static_cast<uint64_t>(end - *p)) {
            return Fail(field_path, number, at,
                        absl::StrCat("its length ", len, " runs past the end of its message (",
                                     end - *p, " bytes are left)"));
          }
          const char* value = *p;
          *p += len;
          if (field == nullptr) break;
          if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
            const char* q = value;
            absl::Status s = Walk(field->message_type(), field_path, &q, *p, depth + 1, 0);
            if (!s.ok()) return s;
          } else if (field->type() == FieldDescriptor::TYPE_STRING &&
                     field->file()->syntax() == google::protobuf::FileDescriptor::SYNTAX_PROTO3 &&
                     !ValidUtf8(absl::string_view(value, len))) {
            return Fail(field_path, number, at, "a string that is not valid UTF-8");
          }
          break;
        }
        case 3: {
          absl::Status s = Walk(nullptr, field_path, p, end, depth + 1, number);
          if (!s.ok()) return s;
          break;
        }
        case 4:
          if (number != group) {
            return Fail(field_path, number, at, "an end-group tag without its start-group");
          }
          return absl::OkStatus();
        default:
          return Fail(field_path, number, at,
                      absl::StrCat("wire type ", wire_type, " is not valid"));
      }
    }
    if (group > 0) return Fail(path, group, *p, "a group without its end-group tag");
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const std::string& path, int number, const char* at, absl::string_view reason) {
    std::string where = path.empty() ? std::string() : absl::StrCat(path, " ");
    if (number > 0) absl::StrAppend(&where, "(field ", number, ") ");
    const std::string message = absl::StrCat("the request is not a valid ", root_->full_name(),
                                             ": ", where, "at byte ", at - base_, ": ", reason);
    // A defect in the message as a whole names no field.
    if (path.empty()) return absl::InvalidArgumentError(message);
    return InvalidArgumentAt(path, message);
  }

  const Descriptor* const root_;
  const char* const base_;
};

}  // namespace

absl::Status ExplainParseFailure(const Descriptor* type, absl::string_view bytes) {
  Walker walker(type, bytes);
  const char* p = bytes.data();
  return walker.Walk(type, "", &p, bytes.data() + bytes.size(), 0, 0);
}

}  // namespace tensorops
