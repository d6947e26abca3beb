// The REST door's JSON: OipService's values (server/oip/oip_service.h)
// rendered as the Open Inference Protocol's HTTP endpoints answer them
// (../shared/api-rest.md "Endpoints"), the register body read, and JSON
// answers and errors as HttpResponses. RapidJSON, no Boost.
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_SERVER_HTTP_OIP_JSON_H_
#define TENSOROPS_SERVER_HTTP_OIP_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/op_registry.h"
#include "server/http/http_message.h"
#include "server/oip/oip_service.h"

namespace tensorops {

// The HTTP status of an error (../shared/api-rest.md "Status codes"): 400
// for what a request got wrong, 401/403/404, 409 for a conflict (a shared
// memory region's name already registered), 413 for a size limit (a
// RESOURCE_EXHAUSTED naming its "(--max_..." flag, or a request larger than
// the whole in-flight budget: ErrorInfo REQUEST_OVER_INFLIGHT_BUDGET), 503
// for the in-flight budget busy, the queue and the drain, 504, 501; 500 only for INTERNAL,
// UNKNOWN and DATA_LOSS, which no request can cause (bugs).
int HttpStatusOf(const absl::Status& status);
// {"error": "<message>"}.
std::string ErrorJson(absl::string_view message);
// {"error": "<message>", "details": [...]}: the status's google.rpc details
// in proto3 JSON (wire/status_details.h StatusDetailsJson), an
// INVALID_ARGUMENT's BadRequest made from the field path its error carries
// (WithBadRequest, kernels/field_path.h); no "details" when none.
std::string ErrorJson(const absl::Status& status);

// `status` with `json` as its application/json body.
HttpResponse JsonResponse(int status, std::string json);
// An error's answer: its HTTP status (HttpStatusOf), ErrorJson(status) and,
// when the status carries a RetryInfo, Retry-After.
HttpResponse ErrorResponse(const absl::Status& status);

std::string ServerMetadataJson(const OipServerMetadata& m);
std::string ModelMetadataJson(const OipModelMetadata& m);
std::string ModelReadyJson(const OpDef& def);
// {"model_stats": [...]}: every duration of the protocol (compute_input and
// compute_output zero) and an empty batch_stats.
std::string StatsJson(const std::vector<OipModelStats>& stats);
std::string RepositoryIndexJson(const std::vector<OipModelIndex>& models);
std::string ShmStatusJson(const std::vector<OipShmRegionStatus>& regions);

// A system shared memory register body: {"key", "offset" (0 when absent),
// "byte_size"}.
struct ShmRegisterBody {
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<ShmRegisterBody> ParseRegisterBody(absl::string_view body);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_OIP_JSON_H_
