// The CLI's text form of a tensor: nested JSON-style arrays such as
// [[1, 2], [3, 4]]. COMPLEX elements are [re, im] pairs (an innermost
// dimension of 2), STRING elements quoted strings, BOOL true/false, floats
// may be nan, inf or -inf.
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_CLIENT_CLI_TEXT_FORMAT_H_
#define TENSOROPS_CLIENT_CLI_TEXT_FORMAT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensorops/tensor.h"

namespace tensorops::cli {

// "f32", "float32", "FLOAT32", "i64", "bool", "str", "c64", "bf16", "f8e4m3", ...
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
// The short name ("f32"), as accepted by ParseDataType.
std::string ShortDataTypeName(DataType dtype);

// "2,3", "[2,3]" or "[]" / "" (a scalar).
absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view text);

// Parses `text` into a tensor. Without `dtype` the type is inferred: quoted
// strings -> STRING, true/false -> BOOL, integers -> INT64, else FLOAT32.
// `shape`, if given, replaces the nesting's shape (same element count).
absl::StatusOr<Tensor> ParseTensor(absl::string_view text, std::optional<DataType> dtype,
                                   std::optional<std::vector<int64_t>> shape);

// Multi-line nested arrays (one row per line); ParseTensor reads it back.
std::string FormatTensor(const Tensor& tensor);

}  // namespace tensorops::cli

#endif  // TENSOROPS_CLIENT_CLI_TEXT_FORMAT_H_
