// OipService: every method of the protocol's control plane, over the
// built-in ops, a fake server state and a real ShmRegistry; the errors both
// doors render (unknown model, wrong version, shared memory off, a
// duplicate region, another owner's region).
#include "server/oip/oip_service.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/op_registry.h"
#include "server/oip/oip_codec.h"

namespace tensorops {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeState final : public OipServerState {
 public:
  bool draining() const override { return draining_; }
  OipModelTotals Totals(absl::string_view model) const override {
    auto it = totals_.find(std::string(model));
    return it == totals_.end() ? OipModelTotals{} : it->second;
  }
  void SetSharedMemoryRegions(int64_t regions) override {
    gauge_ = regions;
    ++gauge_sets_;
  }

  bool draining_ = false;
  std::map<std::string, OipModelTotals> totals_;
  int64_t gauge_ = -1;
  int gauge_sets_ = 0;
};

class OipServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterBuiltinOps(&registry_);
    key_ = absl::StrCat("/tensorops-test-oipsvc-", getpid());
    shm_unlink(key_.c_str());
    fd_ = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, 4096), 0);
  }
  void TearDown() override {
    close(fd_);
    shm_unlink(key_.c_str());
  }

  OipService Service(ShmRegistry* shm, bool tokens_required = false) {
    OipService::Options options;
    options.tokens_required = tokens_required;
    return OipService(&registry_, shm, &state_, options);
  }

  std::vector<std::string> ModelNames() const {
    std::vector<std::string> names;
    for (const auto& def : registry_.ops()) names.push_back(def->spec.name);
    return names;
  }

  OpRegistry registry_;
  FakeState state_;
  ShmRegistry shm_off_{ShmRegistry::Options{}};
  ShmRegistry shm_on_{ShmRegistry::Options{true, "", 8}};
  std::string key_;
  int fd_ = -1;
};

TEST_F(OipServiceTest, LiveAlwaysReadyUntilTheDrain) {
  OipService oip = Service(&shm_off_);
  EXPECT_TRUE(oip.ServerLive());
  EXPECT_TRUE(oip.ServerReady());
  state_.draining_ = true;
  EXPECT_TRUE(oip.ServerLive());
  EXPECT_FALSE(oip.ServerReady());
}

TEST_F(OipServiceTest, ServerMetadataListsWhatEachDoorImplements) {
  struct Row {
    const char* what;
    OipDoor door;
    bool shm;
    std::vector<std::string> extensions;
  };
  const Row rows[] = {
      {"grpc, shm off", OipDoor::kGrpc, false, {"statistics"}},
      {"grpc, shm on", OipDoor::kGrpc, true, {"statistics", "system_shared_memory"}},
      {"rest, shm off",
       OipDoor::kRest,
       false,
       {"binary_tensor_data", "statistics", "model_repository"}},
      {"rest, shm on",
       OipDoor::kRest,
       true,
       {"binary_tensor_data", "statistics", "model_repository", "system_shared_memory"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    OipServerMetadata m = Service(row.shm ? &shm_on_ : &shm_off_).ServerMetadata(row.door);
    EXPECT_EQ(m.name, "tensorops");
    EXPECT_FALSE(m.version.empty());
    EXPECT_EQ(m.extensions, row.extensions);
  }
}

TEST_F(OipServiceTest, ModelLookupNamesWhatIsMissing) {
  OipService oip = Service(&shm_off_);
  struct Row {
    const char* name;
    const char* version;
    const char* op;       // found: its canonical name
    const char* message;  // else NOT_FOUND with this
  };
  const Row rows[] = {
      {"Reverse", "", "Reverse", nullptr},
      {"Reverse", "1", "Reverse", nullptr},
      {"Roll-7", "", "Roll", nullptr},  // an alias names its op
      {"Reverse", "2", nullptr, "model 'Reverse' has no version '2'; its only version is '1'"},
      {"Nope", "", nullptr, "unknown model 'Nope'; the models are ops: Reverse, "},
      {"Nope", "1", nullptr, "unknown model 'Nope'"},
      {"", "", nullptr, "unknown model ''"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat(row.name, " version ", row.version));
    absl::StatusOr<const OpDef*> def = oip.Model(row.name, row.version);
    absl::StatusOr<OipModelMetadata> md = oip.ModelMetadata(row.name, row.version);
    absl::StatusOr<std::vector<OipModelStats>> stats = oip.ModelStatistics(row.name, row.version);
    if (row.op != nullptr) {
      ASSERT_TRUE(def.ok()) << def.status();
      EXPECT_EQ((*def)->spec.name, row.op);
      ASSERT_TRUE(md.ok()) << md.status();
      EXPECT_EQ(md->name, row.op);
      ASSERT_TRUE(stats.ok()) << stats.status();
      ASSERT_EQ(stats->size(), 1u);
      EXPECT_EQ((*stats)[0].name, row.op);
      continue;
    }
    if (std::string(row.name).empty()) {
      // ModelStatistics: an empty name is every model.
      EXPECT_TRUE(stats.ok());
    } else {
      EXPECT_EQ(stats.status(), def.status());
    }
    EXPECT_EQ(def.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(def.status().message()), HasSubstr(row.message));
    EXPECT_EQ(md.status(), def.status());
  }
}

TEST_F(OipServiceTest, ModelMetadataFollowsTheShapeRule) {
  OipService oip = Service(&shm_off_);
  absl::StatusOr<OipModelMetadata> reverse = oip.ModelMetadata("Reverse", "");
  ASSERT_TRUE(reverse.ok()) << reverse.status();
  EXPECT_EQ(reverse->versions, std::vector<std::string>{"1"});
  EXPECT_EQ(reverse->platform, "tensorops");
  ASSERT_EQ(reverse->inputs.size(), 2u);
  EXPECT_EQ(reverse->inputs[0].name, "data");
  EXPECT_EQ(reverse->inputs[0].datatype, "FP32");
  EXPECT_THAT(reverse->inputs[0].shape, ElementsAre(-1));
  EXPECT_EQ(reverse->inputs[1].name, "axis");
  EXPECT_EQ(reverse->inputs[1].datatype, "INT64");
  ASSERT_EQ(reverse->outputs.size(), 1u);
  EXPECT_EQ(reverse->outputs[0].name, "output");
  EXPECT_EQ(reverse->outputs[0].datatype, "FP32");
  EXPECT_THAT(reverse->outputs[0].shape, ElementsAre(-1));
  // Every op: -1 per dimension of a fixed rank, else [-1]; outputs as the
  // data input.
  for (const auto& def : registry_.ops()) {
    SCOPED_TRACE(def->spec.name);
    absl::StatusOr<OipModelMetadata> m = oip.ModelMetadata(def->spec.name, "1");
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->inputs.size(), def->spec.inputs.size());
    for (size_t i = 0; i < m->inputs.size(); ++i) {
      const InputSpec& in = def->spec.inputs[i];
      EXPECT_EQ(m->inputs[i].name, in.name);
      EXPECT_EQ(m->inputs[i].datatype, RepresentativeDatatype(in.types));
      if (in.max_rank >= 0 && in.max_rank == in.min_rank) {
        EXPECT_EQ(m->inputs[i].shape, std::vector<int64_t>(in.max_rank, -1));
      } else {
        EXPECT_THAT(m->inputs[i].shape, ElementsAre(-1));
      }
    }
    ASSERT_EQ(m->outputs.size(), def->spec.outputs.size());
    for (const OipTensorMetadata& out : m->outputs) {
      EXPECT_EQ(out.datatype, m->inputs[0].datatype);
      EXPECT_THAT(out.shape, ElementsAre(-1));
    }
  }
}

TEST_F(OipServiceTest, StatisticsComeFromTheServerTotals) {
  OipModelTotals t;
  t.success_count = 3;
  t.success_seconds = 1.5;
  t.fail_count = 2;
  t.fail_seconds = 0.25;
  t.queue_count = 4;
  t.queue_seconds = 0.125;
  t.kernel_count = 3;
  t.kernel_seconds = 0.5;
  t.last_call_unix_seconds = 1700000000.5;
  state_.totals_["Roll"] = t;
  OipService oip = Service(&shm_off_);

  absl::StatusOr<std::vector<OipModelStats>> one = oip.ModelStatistics("Roll-7", "1");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  const OipModelStats& s = (*one)[0];
  EXPECT_EQ(s.name, "Roll");
  EXPECT_EQ(s.version, "1");
  EXPECT_EQ(s.last_inference, uint64_t{1700000000500});
  EXPECT_EQ(s.inference_count, 3u);
  EXPECT_EQ(s.execution_count, 3u);
  EXPECT_EQ(s.success.count, 3u);
  EXPECT_EQ(s.success.ns, uint64_t{1500000000});
  EXPECT_EQ(s.fail.count, 2u);
  EXPECT_EQ(s.fail.ns, uint64_t{250000000});
  EXPECT_EQ(s.queue.count, 4u);
  EXPECT_EQ(s.queue.ns, uint64_t{125000000});
  EXPECT_EQ(s.compute_infer.count, 3u);
  EXPECT_EQ(s.compute_infer.ns, uint64_t{500000000});

  // No name: every model, in the registry's order, whatever the version.
  absl::StatusOr<std::vector<OipModelStats>> all = oip.ModelStatistics("", "7");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names;
  for (const OipModelStats& m : *all) {
    names.push_back(m.name);
    if (m.name != "Roll") {
      EXPECT_EQ(m.inference_count, 0u) << m.name;
    }
  }
  EXPECT_EQ(names, ModelNames());
}

TEST_F(OipServiceTest, RepositoryIndexIsEveryModelReady) {
  OipService oip = Service(&shm_off_);
  for (bool ready_only : {false, true}) {
    SCOPED_TRACE(ready_only);
    std::vector<std::string> names;
    for (const OipModelIndex& m : oip.RepositoryIndex(ready_only)) {
      names.push_back(m.name);
      EXPECT_EQ(m.version, "1");
      EXPECT_EQ(m.state, "READY");
      EXPECT_EQ(m.reason, "");
    }
    EXPECT_EQ(names, ModelNames());
  }
}

TEST_F(OipServiceTest, SharedMemoryOffIsUnavailable) {
  OipService oip = Service(&shm_off_);
  EXPECT_FALSE(oip.shm_enabled());
  const absl::Status statuses[] = {
      oip.SystemSharedMemoryStatus("", "").status(),
      oip.SystemSharedMemoryStatus("", "r").status(),
      oip.SystemSharedMemoryRegister("", "r", key_, 0, 16),
      oip.SystemSharedMemoryUnregister("", "r"),
      oip.SystemSharedMemoryUnregister("", ""),
  };
  for (const absl::Status& st : statuses) {
    SCOPED_TRACE(st.ToString());
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(st.message()), HasSubstr("--shared_memory=system"));
  }
  EXPECT_EQ(state_.gauge_, 0);
}

TEST_F(OipServiceTest, SharedMemoryRegionsBelongToTheirOwner) {
  OipService oip = Service(&shm_on_, /*tokens_required=*/true);
  EXPECT_TRUE(oip.shm_enabled());
  EXPECT_EQ(oip.shm(), &shm_on_);
  const std::string a = "Bearer a", b = "Bearer b";

  ASSERT_TRUE(oip.SystemSharedMemoryRegister(a, "r", key_, 64, 128).ok());
  EXPECT_EQ(state_.gauge_, 1);
  ASSERT_TRUE(oip.SystemSharedMemoryRegister(a, "s", key_, 0, 16).ok());
  EXPECT_EQ(state_.gauge_, 2);
  // Another owner may use the same name.
  ASSERT_TRUE(oip.SystemSharedMemoryRegister(b, "r", key_, 0, 8).ok());
  EXPECT_EQ(state_.gauge_, 3);

  struct Row {
    const char* what;
    absl::Status status;
    absl::StatusCode code;
    const char* message;
  };
  const int sets_before = state_.gauge_sets_;
  const Row rows[] = {
      {"duplicate", oip.SystemSharedMemoryRegister(a, "r", key_, 0, 16),
       absl::StatusCode::kAlreadyExists, "'r'"},
      {"bad key", oip.SystemSharedMemoryRegister(a, "t", "no-slash", 0, 16),
       absl::StatusCode::kInvalidArgument, "is not a POSIX shared memory name"},
      {"empty name", oip.SystemSharedMemoryRegister(a, "", key_, 0, 16),
       absl::StatusCode::kInvalidArgument, "needs a name"},
      {"other's status", oip.SystemSharedMemoryStatus(b, "s").status(), absl::StatusCode::kNotFound,
       "no shared memory region named 's' is registered"},
      {"other's unregister", oip.SystemSharedMemoryUnregister(b, "s"), absl::StatusCode::kNotFound,
       "no shared memory region named 's' is registered"},
      {"unknown", oip.SystemSharedMemoryUnregister(a, "zz"), absl::StatusCode::kNotFound, "'zz'"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    EXPECT_EQ(row.status.code(), row.code) << row.status;
    EXPECT_THAT(std::string(row.status.message()), HasSubstr(row.message));
  }
  // The gauge is set after every register and unregister, refused or not.
  EXPECT_EQ(state_.gauge_sets_, sets_before + 5);
  EXPECT_EQ(state_.gauge_, 3);

  absl::StatusOr<std::vector<OipShmRegionStatus>> mine = oip.SystemSharedMemoryStatus(a, "");
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].name, "r");
  EXPECT_EQ((*mine)[0].key, key_);
  EXPECT_EQ((*mine)[0].offset, 64u);
  EXPECT_EQ((*mine)[0].byte_size, 128u);
  EXPECT_EQ((*mine)[1].name, "s");
  absl::StatusOr<std::vector<OipShmRegionStatus>> one = oip.SystemSharedMemoryStatus(b, "r");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].byte_size, 8u);

  // Unregister with no name: all of the caller's, none of the other's.
  ASSERT_TRUE(oip.SystemSharedMemoryUnregister(a, "").ok());
  EXPECT_EQ(state_.gauge_, 1);
  EXPECT_TRUE(oip.SystemSharedMemoryStatus(a, "")->empty());
  EXPECT_EQ(oip.SystemSharedMemoryStatus(b, "")->size(), 1u);
  ASSERT_TRUE(oip.SystemSharedMemoryUnregister(b, "r").ok());
  EXPECT_EQ(state_.gauge_, 0);
}

TEST_F(OipServiceTest, ShmOwnerIsTheAuthorizationOnlyWithTokens) {
  struct Row {
    bool tokens_required;
    std::optional<absl::string_view> authorization;
    const char* owner;
  };
  const Row rows[] = {
      {false, std::nullopt, ""},      {false, "Bearer a", ""}, {true, std::nullopt, ""},
      {true, "Bearer a", "Bearer a"}, {true, "", ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat(row.tokens_required, " ", row.authorization.value_or("(none)")));
    EXPECT_EQ(Service(&shm_on_, row.tokens_required).ShmOwner(row.authorization), row.owner);
  }
}

}  // namespace
}  // namespace tensorops
