// The Open Inference Protocol's control plane as a service, below any door:
// health, server and model metadata, statistics, the repository index and
// system shared memory, as plain values and absl::Status. A door
// (server/grpc/inference_service.cc, server/http/oip_routes.cc) gates the
// call (token, drain), calls one method and renders its value in its wire
// format; its own rules stay in it (REST's 501 for shared memory when off,
// its JSON body of a registration). Infer is PreparedInfer (oip_codec.h).
//
// Thread-safety: every method is safe from any thread (the registries and
// the server state are).
#ifndef TENSOROPS_SERVER_OIP_OIP_SERVICE_H_
#define TENSOROPS_SERVER_OIP_OIP_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/op_registry.h"
#include "server/oip/shm_registry.h"

namespace tensorops {

// The door asking, where the protocol's answer differs between doors.
enum class OipDoor { kGrpc, kRest };

// ServerMetadata.
struct OipServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;  // in the order they are listed
};

// A tensor of ModelMetadata: `shape` has -1 for "any size" in a dimension;
// [-1] also stands for an input of any rank.
struct OipTensorMetadata {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
};

// ModelMetadata.
struct OipModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<OipTensorMetadata> inputs;
  std::vector<OipTensorMetadata> outputs;
};

// A cumulative count and its time (StatisticDuration).
struct OipDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// One model's statistics (ModelStatistics). Decoding and encoding are not
// timed apart from the call: compute_input and compute_output are zero.
struct OipModelStats {
  std::string name;
  std::string version;
  uint64_t last_inference = 0;  // ms since the epoch; 0: never
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  OipDuration success;
  OipDuration fail;
  OipDuration queue;
  OipDuration compute_infer;
};

// One model of the repository index.
struct OipModelIndex {
  std::string name;
  std::string version;
  std::string state;
  std::string reason;
};

// A registered shared-memory region (SystemSharedMemoryStatus).
struct OipShmRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// One model's numbers as the metrics count them, summed over every door
// (Metrics::OpTotals: oip/ stays below core/, so core/'s type stays out of
// oip/ and the assembly copies one into the other).
struct OipModelTotals {
  uint64_t success_count = 0;  // calls answered OK
  uint64_t fail_count = 0;     // calls answered with an error
  double success_seconds = 0;  // their whole durations
  double fail_seconds = 0;
  uint64_t queue_count = 0;  // calls that left the queue for the kernel, and their wait
  double queue_seconds = 0;
  uint64_t kernel_count = 0;  // kernels run, and their time
  double kernel_seconds = 0;
  double last_call_unix_seconds = 0;  // 0: never
};

// What the service reads from the server around it and reports to it: the
// drain and the metrics (the server implements it over its call pipeline).
// Must be safe from any thread.
class OipServerState {
 public:
  virtual ~OipServerState() = default;
  // True from the start of the drain.
  virtual bool draining() const = 0;
  // `model`'s (canonical name) totals.
  virtual OipModelTotals Totals(absl::string_view model) const = 0;
  // The registered regions of every owner (a gauge), after each change.
  virtual void SetSharedMemoryRegions(int64_t regions) = 0;
};

class OipService {
 public:
  struct Options {
    bool tokens_required = false;  // a bearer token is configured (ShmOwner)
  };
  // No pointer is owned; all must outlive the service.
  OipService(const OpRegistry* registry, ShmRegistry* shm, OipServerState* state, Options options);

  // The registry infer reads shared-memory regions from.
  const ShmRegistry* shm() const { return shm_; }
  bool shm_enabled() const { return shm_->enabled(); }
  // The caller's identity for shared-memory regions: its Authorization value
  // (null when it sent none) when tokens are required, else "" for every caller.
  std::string ShmOwner(std::optional<absl::string_view> authorization) const;

  // ServerLive: a process that answers is live.
  bool ServerLive() const { return true; }
  // ServerReady: false from the start of the drain.
  bool ServerReady() const;
  // ServerMetadata: "tensorops", the build's version and the extensions
  // `door` implements (system_shared_memory only when on).
  OipServerMetadata ServerMetadata(OipDoor door) const;

  // The op a model name and version name (an alias names its op): NOT_FOUND
  // naming them, and listing the models, when there is none. ModelReady.
  absl::StatusOr<const OpDef*> Model(absl::string_view name, absl::string_view version) const;
  // ModelMetadata: the op spec's inputs and outputs, each with a
  // representative datatype (RepresentativeDatatype), -1 per dimension when
  // its rank is fixed, else [-1]; outputs as the data input. Errors as Model.
  absl::StatusOr<OipModelMetadata> ModelMetadata(absl::string_view name,
                                                 absl::string_view version) const;
  // ModelStatistics of `name` (empty: every model, whatever `version`), from
  // the server's metrics. Errors as Model.
  absl::StatusOr<std::vector<OipModelStats>> ModelStatistics(absl::string_view name,
                                                             absl::string_view version) const;
  // RepositoryIndex: every model, READY (every op is always loaded, so
  // `ready_only` filters nothing out).
  std::vector<OipModelIndex> RepositoryIndex(bool ready_only) const;

  // `owner`'s regions (empty name: all of them, by name): ShmRegistry::List.
  absl::StatusOr<std::vector<OipShmRegionStatus>> SystemSharedMemoryStatus(
      const std::string& owner, const std::string& name) const;
  // ShmRegistry::Register, then the gauge (ALREADY_EXISTS for a name `owner`
  // already has).
  absl::Status SystemSharedMemoryRegister(const std::string& owner, const std::string& name,
                                          const std::string& key, uint64_t offset,
                                          uint64_t byte_size);
  // ShmRegistry::Unregister (empty name: all of `owner`'s), then the gauge.
  absl::Status SystemSharedMemoryUnregister(const std::string& owner, const std::string& name);

 private:
  const OpRegistry* const registry_;
  ShmRegistry* const shm_;
  OipServerState* const state_;
  const Options options_;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_OIP_OIP_SERVICE_H_
