// Op attributes as kernels see them: a JSON-like value per name, decoded from
// the request's google.protobuf.Struct by the server. Typed getters check the
// kind and range and name the attribute in every error.
#ifndef TENSOROPS_KERNELS_ATTRS_H_
#define TENSOROPS_KERNELS_ATTRS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorops {

struct AttrValue {
  enum class Kind { kNull, kNumber, kString, kBool, kList, kStruct };
  Kind kind = Kind::kNull;
  double number = 0;     // kNumber
  bool boolean = false;  // kBool
  std::string str;       // kString

  static AttrValue Number(double v) {
    AttrValue a;
    a.kind = Kind::kNumber;
    a.number = v;
    return a;
  }
  static AttrValue String(std::string v) {
    AttrValue a;
    a.kind = Kind::kString;
    a.str = std::move(v);
    return a;
  }
  static AttrValue Bool(bool v) {
    AttrValue a;
    a.kind = Kind::kBool;
    a.boolean = v;
    return a;
  }
  static AttrValue OfKind(Kind k) {
    AttrValue a;
    a.kind = k;
    return a;
  }
};

// "number", "string", ...
absl::string_view AttrKindName(AttrValue::Kind kind);

using Attrs = std::map<std::string, AttrValue, std::less<>>;

// Reads an integer attribute: absent -> `default_value` (nullopt: required);
// not a number, not whole, or beyond +-2^53 -> INVALID_ARGUMENT naming
// "<op>: attribute '<name>'".
absl::StatusOr<int64_t> GetIntAttr(const Attrs& attrs, absl::string_view op, absl::string_view name,
                                   std::optional<int64_t> default_value);
// Reads a string attribute; same rules.
absl::StatusOr<std::string> GetStringAttr(const Attrs& attrs, absl::string_view op,
                                          absl::string_view name,
                                          std::optional<std::string> default_value);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_ATTRS_H_
