// Decodes ExecuteRequest.attrs (google.protobuf.Struct) into kernel Attrs.
#ifndef TENSOROPS_WIRE_ATTRS_CODEC_H_
#define TENSOROPS_WIRE_ATTRS_CODEC_H_

#include "google/protobuf/struct.pb.h"
#include "kernels/attrs.h"

namespace tensorops {

// Every value keeps its JSON kind; lists and nested structs keep only their
// kind (no op takes one), so an op can reject them by name.
Attrs DecodeAttrs(const google::protobuf::Struct& attrs);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_ATTRS_CODEC_H_
