// Which field of a request an INVALID_ARGUMENT is about, attached where the
// error is made: an absl::Status payload holding the field's path (plain
// text, no protobuf), which each layer on the way out completes or
// translates, and each door's edge renders as google.rpc.BadRequest's
// field (wire/status_details.h WithBadRequest). Messages stay free text:
// nothing reads a path back out of one.
//
// A path is names joined by '.', each optionally indexed ("inputs[2].shape[0]",
// "attrs.mode", "then[1].op"), in the vocabulary of the layer that holds it:
//  - a helper that checks a part of something (a shape, a tensor's values)
//    gives a path relative to it: "[3]", ".data[3]", ".dtype", or "" for the
//    thing itself; its caller, which knows what the thing is, prefixes it
//    (PrefixErrorFieldPath, AtField).
//  - the kernels speak the op's vocabulary: inputs[i] (the op's i-th input,
//    in its spec's order) with .dtype, .shape, .shape[d], .data, .data[k]
//    (the k-th element, row-major); attrs.<name>; op; inputs (their count);
//    then and then[s] ... for a chain's steps (whose inputs[j] are the
//    step's own, after the chained data).
//  - each door's decoder maps those onto its request's own fields
//    (MapErrorFieldPath): tensorops.v1 "inputs[2].int64_data[0]", the Open
//    Inference Protocol "inputs[1].contents.int64_contents[0]",
//    "raw_input_contents[1]", "parameters.then[0].op", REST "inputs[0].data[3]".
//
// Thread-safety: pure functions.
#ifndef TENSOROPS_KERNELS_FIELD_PATH_H_
#define TENSOROPS_KERNELS_FIELD_PATH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorops {

// The payload's type URL. Not google.rpc's: the doors' encoders, which send
// only google.rpc payloads, leave it out of the wire.
inline constexpr absl::string_view kFieldPathUrl = "tensorops/field-path";

// INVALID_ARGUMENT `message` about the field at `path`.
absl::Status InvalidArgumentAt(absl::string_view path, absl::string_view message);

// The path an INVALID_ARGUMENT carries; nullopt for any other status or
// one made without a path.
std::optional<std::string> ErrorFieldPath(const absl::Status& status);

// An INVALID_ARGUMENT with its path set to `path`; any other status as it is.
absl::Status WithErrorFieldPath(absl::Status status, absl::string_view path);

// An INVALID_ARGUMENT with its path `prefix` + its path ("" when it carries
// none: the error is about the prefix's field as a whole); any other status
// as it is.
absl::Status PrefixErrorFieldPath(absl::Status status, absl::string_view prefix);

// An INVALID_ARGUMENT that carries a path with that path through `map`; any
// other status as it is.
absl::Status MapErrorFieldPath(absl::Status status,
                               absl::FunctionRef<std::string(absl::string_view)> map);

// `value`, or its error with PrefixErrorFieldPath(prefix).
template <typename T>
absl::StatusOr<T> AtField(absl::StatusOr<T> value, absl::string_view prefix) {
  if (value.ok()) return value;
  return PrefixErrorFieldPath(std::move(value).status(), prefix);
}

// True when `path` is `name[index]` followed by `rest` ("inputs[2].data[0]"
// with name "inputs": index 2, rest ".data[0]").
bool SplitIndexedPath(absl::string_view path, absl::string_view name, int64_t* index,
                      absl::string_view* rest);
// True when `*rest` is a tensor's data, ".data" or ".data[k]..." (not
// ".datatype"), which it then loses its ".data" ("[k]...").
bool ConsumeDataPath(absl::string_view* rest);
// The same for a path that starts with its index ("[3].x": 3, ".x").
bool SplitLeadingIndex(absl::string_view path, int64_t* index, absl::string_view* rest);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_FIELD_PATH_H_
