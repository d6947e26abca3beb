#include "kernels/field_path.h"

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tensorops {

absl::Status InvalidArgumentAt(absl::string_view path, absl::string_view message) {
  return WithErrorFieldPath(absl::InvalidArgumentError(message), path);
}

std::optional<std::string> ErrorFieldPath(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return std::nullopt;
  const auto path = status.GetPayload(kFieldPathUrl);  // absl::optional here
  if (!path.has_value()) return std::nullopt;
  return std::string(*path);
}

absl::Status WithErrorFieldPath(absl::Status status, absl::string_view path) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  status.SetPayload(kFieldPathUrl, absl::Cord(path));
  return status;
}

absl::Status PrefixErrorFieldPath(absl::Status status, absl::string_view prefix) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  const std::string path = absl::StrCat(prefix, ErrorFieldPath(status).value_or(""));
  return WithErrorFieldPath(std::move(status), path);
}

absl::Status MapErrorFieldPath(absl::Status status,
                               absl::FunctionRef<std::string(absl::string_view)> map) {
  const std::optional<std::string> path = ErrorFieldPath(status);
  if (!path.has_value()) return status;
  return WithErrorFieldPath(std::move(status), map(*path));
}

bool SplitIndexedPath(absl::string_view path, absl::string_view name, int64_t* index,
                      absl::string_view* rest) {
  return absl::ConsumePrefix(&path, name) && SplitLeadingIndex(path, index, rest);
}

bool ConsumeDataPath(absl::string_view* rest) {
  absl::string_view r = *rest;
  if (!absl::ConsumePrefix(&r, ".data") || (!r.empty() && r[0] != '[')) return false;
  *rest = r;
  return true;
}

bool SplitLeadingIndex(absl::string_view path, int64_t* index, absl::string_view* rest) {
  if (!absl::ConsumePrefix(&path, "[")) return false;
  const size_t close = path.find(']');
  if (close == absl::string_view::npos || close == 0) return false;
  for (char c : path.substr(0, close)) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  if (!absl::SimpleAtoi(path.substr(0, close), index)) return false;
  *rest = path.substr(close + 1);
  return true;
}

}  // namespace tensorops
