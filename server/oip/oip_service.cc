#include "server/oip/oip_service.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/oip/oip_codec.h"

#ifndef TENSOROPS_VERSION
#error "TENSOROPS_VERSION must be defined by the build (server/oip/CMakeLists.txt)"
#endif

namespace tensorops {
namespace {

uint64_t Nanoseconds(double seconds) { return static_cast<uint64_t>(seconds * 1e9); }

// The spec's shape rule: -1 per dimension when the rank is fixed, else [-1].
std::vector<int64_t> MetadataShape(const InputSpec& in) {
  if (in.max_rank >= 0 && in.max_rank == in.min_rank) {
    return std::vector<int64_t>(static_cast<size_t>(in.max_rank), -1);
  }
  return {-1};  // any rank (documented in the proto and docs/cookbook.md)
}

}  // namespace

OipService::OipService(const OpRegistry* registry, ShmRegistry* shm, OipServerState* state,
                       Options options)
    : registry_(registry), shm_(shm), state_(state), options_(std::move(options)) {}

std::string OipService::ShmOwner(std::optional<absl::string_view> authorization) const {
  if (!options_.tokens_required || !authorization.has_value()) return "";
  return std::string(*authorization);
}

bool OipService::ServerReady() const { return !state_->draining(); }

OipServerMetadata OipService::ServerMetadata(OipDoor door) const {
  OipServerMetadata m;
  m.name = "tensorops";
  m.version = TENSOROPS_VERSION;
  // Only what the door implements. REST answers load/unload (501, ops are
  // built in) as well as the index; gRPC declares neither load nor unload,
  // and its list has never named model_repository.
  const bool rest = door == OipDoor::kRest;
  if (rest) m.extensions.push_back("binary_tensor_data");
  m.extensions.push_back("statistics");
  if (rest) m.extensions.push_back("model_repository");
  if (shm_->enabled()) m.extensions.push_back("system_shared_memory");
  return m;
}

absl::StatusOr<const OpDef*> OipService::Model(absl::string_view name,
                                               absl::string_view version) const {
  return FindModel(*registry_, name, version);
}

absl::StatusOr<OipModelMetadata> OipService::ModelMetadata(absl::string_view name,
                                                           absl::string_view version) const {
  absl::StatusOr<const OpDef*> def = Model(name, version);
  if (!def.ok()) return def.status();
  const OpSpec& spec = (*def)->spec;
  OipModelMetadata m;
  m.name = spec.name;
  m.versions = {kModelVersion};
  m.platform = "tensorops";
  for (const InputSpec& in : spec.inputs) {
    m.inputs.push_back({in.name, RepresentativeDatatype(in.types), MetadataShape(in)});
  }
  // Every op's output has the data input's type and shape.
  const InputSpec& data = spec.inputs.front();
  for (const OutputSpec& out : spec.outputs) {
    m.outputs.push_back({out.name, RepresentativeDatatype(data.types), {-1}});
  }
  return m;
}

absl::StatusOr<std::vector<OipModelStats>> OipService::ModelStatistics(
    absl::string_view name, absl::string_view version) const {
  std::vector<const OpDef*> defs;
  if (name.empty()) {
    for (const auto& d : registry_->ops()) defs.push_back(d.get());
  } else {
    absl::StatusOr<const OpDef*> def = Model(name, version);
    if (!def.ok()) return def.status();
    defs.push_back(*def);
  }
  std::vector<OipModelStats> out;
  out.reserve(defs.size());
  for (const OpDef* def : defs) {
    const OipModelTotals t = state_->Totals(def->spec.name);
    OipModelStats s;
    s.name = def->spec.name;
    s.version = kModelVersion;
    s.last_inference = static_cast<uint64_t>(t.last_call_unix_seconds * 1e3);
    s.inference_count = t.success_count;
    s.execution_count = t.kernel_count;
    s.success = {t.success_count, Nanoseconds(t.success_seconds)};
    s.fail = {t.fail_count, Nanoseconds(t.fail_seconds)};
    s.queue = {t.queue_count, Nanoseconds(t.queue_seconds)};
    s.compute_infer = {t.kernel_count, Nanoseconds(t.kernel_seconds)};
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<OipModelIndex> OipService::RepositoryIndex(bool /*ready_only*/) const {
  std::vector<OipModelIndex> out;
  for (const auto& def : registry_->ops()) {
    out.push_back({def->spec.name, kModelVersion, "READY", ""});
  }
  return out;
}

absl::StatusOr<std::vector<OipShmRegionStatus>> OipService::SystemSharedMemoryStatus(
    const std::string& owner, const std::string& name) const {
  absl::StatusOr<std::vector<std::shared_ptr<const ShmRegion>>> regions = shm_->List(owner, name);
  if (!regions.ok()) return regions.status();
  std::vector<OipShmRegionStatus> out;
  out.reserve(regions->size());
  for (const auto& r : *regions) out.push_back({r->name(), r->key(), r->offset(), r->byte_size()});
  return out;
}

absl::Status OipService::SystemSharedMemoryRegister(const std::string& owner,
                                                    const std::string& name, const std::string& key,
                                                    uint64_t offset, uint64_t byte_size) {
  absl::Status s = shm_->Register(owner, name, key, offset, byte_size);
  state_->SetSharedMemoryRegions(shm_->size());
  return s;
}

absl::Status OipService::SystemSharedMemoryUnregister(const std::string& owner,
                                                      const std::string& name) {
  absl::Status s = shm_->Unregister(owner, name);
  state_->SetSharedMemoryRegions(shm_->size());
  return s;
}

}  // namespace tensorops
