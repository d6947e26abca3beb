#include "kernels/attrs.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/shape.h"

namespace tensorops {
namespace {

// Integers a JSON number (double) carries exactly.
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

absl::Status WrongKind(absl::string_view op, absl::string_view name, absl::string_view want,
                       const AttrValue& got) {
  return InvalidArgumentAt(absl::StrCat("attrs.", name),
                           absl::StrCat(op, ": attribute '", name, "' must be ", want, ", got a ",
                                        AttrKindName(got.kind)));
}

}  // namespace

absl::string_view AttrKindName(AttrValue::Kind kind) {
  switch (kind) {
    case AttrValue::Kind::kNull:
      return "null";
    case AttrValue::Kind::kNumber:
      return "number";
    case AttrValue::Kind::kString:
      return "string";
    case AttrValue::Kind::kBool:
      return "bool";
    case AttrValue::Kind::kList:
      return "list";
    case AttrValue::Kind::kStruct:
      return "struct";
  }
  return "unknown";
}

absl::StatusOr<int64_t> GetIntAttr(const Attrs& attrs, absl::string_view op, absl::string_view name,
                                   std::optional<int64_t> default_value) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (default_value.has_value()) return *default_value;
    return InvalidArgumentAt(absl::StrCat("attrs.", name),
                             absl::StrCat(op, ": attribute '", name, "' is required"));
  }
  const AttrValue& v = it->second;
  if (v.kind != AttrValue::Kind::kNumber) return WrongKind(op, name, "an integer", v);
  if (!std::isfinite(v.number) || std::trunc(v.number) != v.number) {
    return InvalidArgumentAt(
        absl::StrCat("attrs.", name),
        absl::StrCat(op, ": attribute '", name, "' = ", v.number, " must be a whole number"));
  }
  if (std::fabs(v.number) > kMaxExactInt) {
    return InvalidArgumentAt(absl::StrCat("attrs.", name),
                             absl::StrCat(op, ": attribute '", name, "' = ", v.number,
                                          " is out of range [-2^53, 2^53]"));
  }
  return static_cast<int64_t>(v.number);
}

absl::StatusOr<std::string> GetStringAttr(const Attrs& attrs, absl::string_view op,
                                          absl::string_view name,
                                          std::optional<std::string> default_value) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (default_value.has_value()) return *default_value;
    return InvalidArgumentAt(absl::StrCat("attrs.", name),
                             absl::StrCat(op, ": attribute '", name, "' is required"));
  }
  if (it->second.kind != AttrValue::Kind::kString)
    return WrongKind(op, name, "a string", it->second);
  return it->second.str;
}

}  // namespace tensorops
