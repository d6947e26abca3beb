#include "wire/status_details.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "kernels/field_path.h"

namespace tensorops {
namespace {

// The prefix every payload of this file's convention has; payloads of other
// conventions (absl's own, a test's) are left out of the wire.
constexpr absl::string_view kRpcTypePrefix = "type.googleapis.com/google.rpc.";

template <typename Message>
std::string TypeUrl() {
  return std::string("type.googleapis.com/") + Message::descriptor()->full_name();
}

template <typename Message>
std::optional<Message> Payload(const absl::Status& status) {
  const auto bytes = status.GetPayload(TypeUrl<Message>());  // absl::optional here
  if (!bytes.has_value()) return std::nullopt;
  Message m;
  if (!m.ParseFromString(std::string(*bytes))) return std::nullopt;
  return m;
}

// proto3 strings must be UTF-8 (Python's decoder refuses others), and a
// message may quote bytes a client sent: non-ASCII bytes become '?', as in
// the REST door's {"error": ...}.
std::string AsciiOnly(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return out;
}

}  // namespace

absl::Status WithRetryInfo(absl::Status status, absl::Duration delay) {
  if (status.ok()) return status;
  const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(delay));
  google::rpc::RetryInfo info;
  info.mutable_retry_delay()->set_seconds(ms / 1000);
  info.mutable_retry_delay()->set_nanos(static_cast<int32_t>(ms % 1000) * 1000000);
  status.SetPayload(TypeUrl<google::rpc::RetryInfo>(), absl::Cord(info.SerializeAsString()));
  return status;
}

absl::Status WithErrorInfo(absl::Status status, absl::string_view reason,
                           const std::map<std::string, std::string>& metadata) {
  if (status.ok()) return status;
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain(std::string(kErrorDomain));
  for (const auto& [key, value] : metadata) (*info.mutable_metadata())[key] = value;
  status.SetPayload(TypeUrl<google::rpc::ErrorInfo>(), absl::Cord(info.SerializeAsString()));
  return status;
}

std::optional<absl::Duration> RetryDelay(const absl::Status& status) {
  std::optional<google::rpc::RetryInfo> info = Payload<google::rpc::RetryInfo>(status);
  if (!info.has_value()) return std::nullopt;
  return absl::Seconds(info->retry_delay().seconds()) +
         absl::Nanoseconds(info->retry_delay().nanos());
}

std::optional<std::string> ErrorReason(const absl::Status& status) {
  std::optional<google::rpc::ErrorInfo> info = Payload<google::rpc::ErrorInfo>(status);
  if (!info.has_value()) return std::nullopt;
  return info->reason();
}

absl::Status WithFieldViolation(absl::Status status, absl::string_view field,
                                absl::string_view description) {
  if (status.ok()) return status;
  google::rpc::BadRequest bad;
  google::rpc::BadRequest::FieldViolation* v = bad.add_field_violations();
  v->set_field(AsciiOnly(field));
  v->set_description(AsciiOnly(description));
  status.SetPayload(TypeUrl<google::rpc::BadRequest>(), absl::Cord(bad.SerializeAsString()));
  return status;
}

std::vector<FieldViolation> FieldViolations(const absl::Status& status) {
  std::vector<FieldViolation> out;
  std::optional<google::rpc::BadRequest> bad = Payload<google::rpc::BadRequest>(status);
  if (!bad.has_value()) return out;
  for (const auto& v : bad->field_violations()) out.push_back({v.field(), v.description()});
  return out;
}

absl::Status WithBadRequest(absl::Status status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      status.GetPayload(TypeUrl<google::rpc::BadRequest>()).has_value()) {
    return status;
  }
  const std::string field = ErrorFieldPath(status).value_or("");
  const std::string description(status.message());
  return WithFieldViolation(std::move(status), field, description);
}

std::string StatusDetailsJson(const absl::Status& status) {
  if (status.ok()) return {};
  std::vector<std::string> details;
  status.ForEachPayload([&details](absl::string_view url, const absl::Cord& bytes) {
    if (!absl::StartsWith(url, kRpcTypePrefix)) return;
    google::protobuf::Any any;
    any.set_type_url(std::string(url));
    any.set_value(std::string(bytes));
    std::string json;
    // A type this binary does not know cannot be rendered: left out.
    if (google::protobuf::util::MessageToJsonString(any, &json).ok()) {
      details.push_back(std::move(json));
    }
  });
  if (details.empty()) return {};
  return absl::StrCat("[", absl::StrJoin(details, ","), "]");
}

std::string EncodeStatusDetails(const absl::Status& status) {
  if (status.ok()) return {};
  google::rpc::Status out;
  status.ForEachPayload([&out](absl::string_view url, const absl::Cord& bytes) {
    if (!absl::StartsWith(url, kRpcTypePrefix)) return;
    google::protobuf::Any* any = out.add_details();
    any->set_type_url(std::string(url));
    any->set_value(std::string(bytes));
  });
  if (out.details_size() == 0) return {};
  out.set_code(static_cast<int32_t>(status.code()));
  out.set_message(std::string(status.message()));
  return out.SerializeAsString();
}

absl::Status DecodeStatusDetails(absl::Status status, absl::string_view bin) {
  if (status.ok() || bin.empty()) return status;
  google::rpc::Status in;
  if (!in.ParseFromArray(bin.data(), static_cast<int>(bin.size())) ||
      in.code() != static_cast<int32_t>(status.code())) {
    return status;
  }
  for (const google::protobuf::Any& any : in.details()) {
    status.SetPayload(any.type_url(), absl::Cord(any.value()));
  }
  return status;
}

}  // namespace tensorops
