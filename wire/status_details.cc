#include "wire/status_details.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

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
