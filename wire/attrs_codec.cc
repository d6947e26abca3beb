#include "wire/attrs_codec.h"

namespace tensorops {

Attrs DecodeAttrs(const google::protobuf::Struct& attrs) {
  Attrs out;
  for (const auto& [name, value] : attrs.fields()) {
    AttrValue v;
    switch (value.kind_case()) {
      case google::protobuf::Value::kNumberValue:
        v = AttrValue::Number(value.number_value());
        break;
      case google::protobuf::Value::kStringValue:
        v = AttrValue::String(value.string_value());
        break;
      case google::protobuf::Value::kBoolValue:
        v = AttrValue::Bool(value.bool_value());
        break;
      case google::protobuf::Value::kListValue:
        v = AttrValue::OfKind(AttrValue::Kind::kList);
        break;
      case google::protobuf::Value::kStructValue:
        v = AttrValue::OfKind(AttrValue::Kind::kStruct);
        break;
      default:
        v = AttrValue::OfKind(AttrValue::Kind::kNull);
        break;
    }
    out.emplace(name, std::move(v));
  }
  return out;
}

}  // namespace tensorops
