// The Open Inference Protocol (inference.GRPCInferenceService) end to end
// against the real tensorops-server binary (started per test on 127.0.0.1
// with --port=0, stopped by PID): every RPC; every op with every datatype,
// typed and raw, compared with Execute's result for the same tensors; BYTES
// both ways; the error codes clients expect; ModelStreamInfer with a bad
// request in the middle; the system shared-memory lifecycle (register, infer,
// status, unregister, use after unregister, out of bounds, truncation, token
// ownership); ModelStatistics against /metrics; the drain (ready false, then
// UNAVAILABLE) and a Unix socket.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/http_get.h"
#include "tests/harness/kernel_gate.h"
#include "tests/harness/raw_bytes.h"
#include "tests/harness/server_process.h"
#include "tests/harness/shm_object.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

using ::tensorops::testing::RawStrings;
using ::tensorops::testing::SetShmParams;
using ::tensorops::testing::ShmObject;

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::HasSubstr;

constexpr char kServer[] = TENSOROPS_SERVER_PATH;

std::unique_ptr<testing::ServerProcess> StartServer(std::vector<std::string> args) {
  return testing::StartTestServer(kServer, std::move(args));
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  return testing::NewTestChannel(address);
}

void SetDeadline(grpc::ClientContext* ctx, int seconds = 20) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

// One datatype: OIP name, native dtype, element width (0: BYTES).
struct Datatype {
  const char* oip;
  v1::DataType native;
  int width;
};
const Datatype kDatatypes[] = {
    {"BOOL", v1::DATA_TYPE_BOOL, 1},     {"UINT8", v1::DATA_TYPE_UINT8, 1},
    {"UINT16", v1::DATA_TYPE_UINT16, 2}, {"UINT32", v1::DATA_TYPE_UINT32, 4},
    {"UINT64", v1::DATA_TYPE_UINT64, 8}, {"INT8", v1::DATA_TYPE_INT8, 1},
    {"INT16", v1::DATA_TYPE_INT16, 2},   {"INT32", v1::DATA_TYPE_INT32, 4},
    {"INT64", v1::DATA_TYPE_INT64, 8},   {"FP16", v1::DATA_TYPE_FLOAT16, 2},
    {"FP32", v1::DATA_TYPE_FLOAT32, 4},  {"FP64", v1::DATA_TYPE_FLOAT64, 8},
    {"BYTES", v1::DATA_TYPE_STRING, 0},  {"BF16", v1::DATA_TYPE_BFLOAT16, 2},
};

// Random elements of a datatype, as raw little-endian bytes (BYTES: a list
// of strings). Floats are drawn from small integers so that typed (float)
// round trips are exact.
struct Elements {
  std::string raw;
  std::vector<std::string> strings;
};
Elements RandomElements(const Datatype& d, int64_t n, std::mt19937* rng) {
  Elements e;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < n; ++i) {
    if (d.width == 0) {
      std::string s(static_cast<size_t>(byte(*rng) % 5), '\0');
      for (char& c : s) c = static_cast<char>(byte(*rng));
      e.strings.push_back(s);
      continue;
    }
    if (std::string(d.oip) == "BOOL") {
      e.raw.push_back(static_cast<char>(byte(*rng) & 1));
    } else if (std::string(d.oip) == "FP32") {
      const float f = static_cast<float>(byte(*rng) - 128);
      e.raw.append(reinterpret_cast<const char*>(&f), 4);
    } else if (std::string(d.oip) == "FP64") {
      const double f = byte(*rng) - 128;
      e.raw.append(reinterpret_cast<const char*>(&f), 8);
    } else {
      for (int b = 0; b < d.width; ++b) e.raw.push_back(static_cast<char>(byte(*rng)));
    }
  }
  return e;
}

// Fills typed contents from raw bytes of the datatype.
void FillTyped(const Datatype& d, const Elements& e, inference::InferTensorContents* c) {
  const std::string name = d.oip;
  if (d.width == 0) {
    for (const auto& s : e.strings) c->add_bytes_contents(s);
    return;
  }
  const int64_t n = static_cast<int64_t>(e.raw.size()) / d.width;
  for (int64_t i = 0; i < n; ++i) {
    const char* p = e.raw.data() + i * d.width;
    auto get = [&](auto v) {
      std::memcpy(&v, p, sizeof(v));
      return v;
    };
    if (name == "BOOL") c->add_bool_contents(*p != 0);
    if (name == "UINT8") c->add_uint_contents(get(uint8_t{}));
    if (name == "UINT16") c->add_uint_contents(get(uint16_t{}));
    if (name == "UINT32") c->add_uint_contents(get(uint32_t{}));
    if (name == "UINT64") c->add_uint64_contents(get(uint64_t{}));
    if (name == "INT8") c->add_int_contents(get(int8_t{}));
    if (name == "INT16") c->add_int_contents(get(int16_t{}));
    if (name == "INT32") c->add_int_contents(get(int32_t{}));
    if (name == "INT64") c->add_int64_contents(get(int64_t{}));
    if (name == "FP32") c->add_fp32_contents(get(float{}));
    if (name == "FP64") c->add_fp64_contents(get(double{}));
  }
}

// One op call in both protocols' terms.
struct OpCase {
  std::string model;
  std::vector<std::string> names;  // the spec's input names
  std::vector<std::pair<std::string, int64_t>> int_params;
  std::string mode;  // Reverse only
  std::vector<int64_t> data_shape;
  std::vector<std::vector<int64_t>> index_values;  // the other inputs, INT64 1-D
};

std::vector<OpCase> OpCases() {
  return {
      {"Roll", {"data", "shift", "axes"}, {}, "", {3, 4, 2}, {{5, -1}, {1, -1}}},
      {"Reverse", {"data", "axis"}, {}, "index", {3, 4, 2}, {{0, 2}}},
      {"ReverseSequence",
       {"data", "seq_lengths"},
       {{"batch_axis", 0}, {"seq_axis", 1}},
       "",
       {3, 4, 2},
       {{4, 0, 2}}},
      {"onnx.ReverseSequence",
       {"input", "sequence_lens"},
       {{"batch_axis", 1}, {"time_axis", 0}},
       "",
       {3, 2},
       {{3, 1}}},
  };
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Int64Raw(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8);
}

// The OIP request for `c` with data `e`; inputs in reverse spec order (any
// order is allowed). typed: contents; else raw_input_contents.
ModelInferRequest OipRequest(const OpCase& c, const Datatype& d, const Elements& e, bool typed) {
  ModelInferRequest r;
  r.set_model_name(c.model);
  r.set_id(absl::StrCat(c.model, "/", d.oip, typed ? "/typed" : "/raw"));
  for (const auto& [k, v] : c.int_params) (*r.mutable_parameters())[k].set_int64_param(v);
  if (!c.mode.empty()) (*r.mutable_parameters())["mode"].set_string_param(c.mode);
  for (int i = static_cast<int>(c.names.size()) - 1; i >= 0; --i) {
    auto* t = r.add_inputs();
    t->set_name(c.names[i]);
    if (i == 0) {
      t->set_datatype(d.oip);
      for (int64_t s : c.data_shape) t->add_shape(s);
      if (typed) {
        FillTyped(d, e, t->mutable_contents());
      } else {
        r.add_raw_input_contents(d.width == 0 ? RawStrings(e.strings) : e.raw);
      }
    } else {
      const auto& v = c.index_values[i - 1];
      t->set_datatype("INT64");
      t->add_shape(static_cast<int64_t>(v.size()));
      if (typed) {
        for (int64_t x : v) t->mutable_contents()->add_int64_contents(x);
      } else {
        r.add_raw_input_contents(Int64Raw(v));
      }
    }
  }
  return r;
}

v1::ExecuteRequest NativeRequest(const OpCase& c, const Datatype& d, const Elements& e) {
  v1::ExecuteRequest r;
  r.set_op(c.model);
  auto& fields = *r.mutable_attrs()->mutable_fields();
  for (const auto& [k, v] : c.int_params) fields[k].set_number_value(static_cast<double>(v));
  if (!c.mode.empty()) fields["mode"].set_string_value(c.mode);
  auto* data = r.add_inputs();
  data->set_dtype(d.native);
  for (int64_t s : c.data_shape) data->add_shape(s);
  if (d.width == 0) {
    for (const auto& s : e.strings) data->add_string_data(s);
  } else {
    data->set_raw_data(e.raw);
  }
  for (const auto& v : c.index_values) {
    auto* t = r.add_inputs();
    t->set_dtype(v1::DATA_TYPE_INT64);
    t->add_shape(static_cast<int64_t>(v.size()));
    t->set_raw_data(Int64Raw(v));
  }
  return r;
}

// Execute's output in the OIP raw form.
std::string NativeResultRaw(const v1::Tensor& t) {
  if (t.dtype() == v1::DATA_TYPE_STRING) {
    return RawStrings(std::vector<std::string>(t.string_data().begin(), t.string_data().end()));
  }
  return t.raw_data();
}

class OipE2ETest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args = {}) {
    server_ = StartServer(std::move(args));
    ASSERT_NE(server_, nullptr);
    channel_ = NewChannel(server_->address());
    stub_ = GRPCInferenceService::NewStub(channel_);
    native_ = v1::TensorOps::NewStub(channel_);
  }

  grpc::Status Infer(const ModelInferRequest& r, ModelInferResponse* out,
                     const std::string& token = "") {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    return stub_->ModelInfer(&ctx, r, out);
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
  std::unique_ptr<v1::TensorOps::Stub> native_;
};

TEST_F(OipE2ETest, EveryOpEveryDatatypeTypedAndRawEqualsExecute) {
  Start();
  std::mt19937 rng(::tensorops::testing::TestSeed(16));
  int checked = 0;
  for (const OpCase& c : OpCases()) {
    for (const Datatype& d : kDatatypes) {
      const Elements e = RandomElements(d, NumElements(c.data_shape), &rng);
      v1::ExecuteResponse expected;
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx);
        ASSERT_TRUE(native_->Execute(&ctx, NativeRequest(c, d, e), &expected).ok());
      }
      for (bool typed : {false, true}) {
        const bool has_typed = std::string(d.oip) != "FP16" && std::string(d.oip) != "BF16";
        if (typed && !has_typed) continue;
        SCOPED_TRACE(absl::StrCat(c.model, " ", d.oip, typed ? " typed" : " raw"));
        const ModelInferRequest request = OipRequest(c, d, e, typed);
        ModelInferResponse response;
        const grpc::Status st = Infer(request, &response);
        ASSERT_TRUE(st.ok()) << st.error_message();
        EXPECT_EQ(response.id(), request.id());
        EXPECT_EQ(response.model_name(), c.model);
        EXPECT_EQ(response.model_version(), "1");
        ASSERT_EQ(response.outputs_size(), 1);
        EXPECT_EQ(response.outputs(0).datatype(), d.oip);
        EXPECT_THAT(response.outputs(0).shape(), ::testing::ElementsAreArray(c.data_shape));
        ASSERT_EQ(response.raw_output_contents_size(), 1);
        EXPECT_EQ(response.raw_output_contents(0), NativeResultRaw(expected.outputs(0)));
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * (14 + 12));
}

TEST_F(OipE2ETest, MetadataRpcs) {
  Start();
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse md;
  ASSERT_TRUE(stub_->ServerMetadata(&c3, {}, &md).ok());
  EXPECT_EQ(md.name(), "tensorops");
  EXPECT_FALSE(md.version().empty());
  EXPECT_THAT(md.extensions(), ::testing::Contains("statistics"));
  // Off by default: the extension is not offered, and its RPCs say so.
  EXPECT_THAT(md.extensions(), ::testing::Not(::testing::Contains("system_shared_memory")));
  inference::SystemSharedMemoryStatusResponse shm;
  grpc::Status st = stub_->SystemSharedMemoryStatus(&c4, {}, &shm);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(st.error_message(), HasSubstr("--shared_memory=system"));
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&c5, {}, &index).ok());
  ASSERT_EQ(index.models_size(), 4);
  for (const auto& m : index.models()) {
    EXPECT_EQ(m.state(), "READY");
    EXPECT_EQ(m.version(), "1");
    grpc::ClientContext a, b;
    inference::ModelReadyRequest rr;
    rr.set_name(m.name());
    inference::ModelReadyResponse rres;
    ASSERT_TRUE(stub_->ModelReady(&a, rr, &rres).ok());
    EXPECT_TRUE(rres.ready());
    inference::ModelMetadataRequest mr;
    mr.set_name(m.name());
    mr.set_version("1");
    inference::ModelMetadataResponse mres;
    ASSERT_TRUE(stub_->ModelMetadata(&b, mr, &mres).ok());
    EXPECT_EQ(mres.name(), m.name());
    EXPECT_THAT(mres.versions(), ::testing::ElementsAre("1"));
    EXPECT_EQ(mres.outputs_size(), 1);
  }
  inference::ModelMetadataRequest bad;
  bad.set_name("Roll");
  bad.set_version("3");
  inference::ModelMetadataResponse bad_res;
  st = stub_->ModelMetadata(&c6, bad, &bad_res);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("model 'Roll' has no version '3'"));
}

TEST_F(OipE2ETest, ErrorCodes) {
  Start();
  std::mt19937 rng(::tensorops::testing::TestSeed(1));
  const OpCase roll = OpCases()[0];
  const Elements e = RandomElements(kDatatypes[7], 24, &rng);  // INT32
  const ModelInferRequest good = OipRequest(roll, kDatatypes[7], e, false);
  struct Row {
    const char* what;
    std::function<void(ModelInferRequest*)> edit;
    grpc::StatusCode code;
    const char* message;
  };
  const Row rows[] = {
      {"unknown model", [](auto* r) { r->set_model_name("Transpose"); },
       grpc::StatusCode::NOT_FOUND,
       "unknown model 'Transpose'; the models are ops: Reverse, ReverseSequence, Roll"},
      {"unknown version", [](auto* r) { r->set_model_version("2"); }, grpc::StatusCode::NOT_FOUND,
       "has no version '2'"},
      {"missing input",
       [](auto* r) {
         r->mutable_inputs()->DeleteSubrange(0, 1);
         r->mutable_raw_input_contents()->DeleteSubrange(0, 1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "missing input 'axes'"},
      {"datatype mismatch with the data",
       [](auto* r) { r->mutable_inputs(2)->set_datatype("INT64"); },
       grpc::StatusCode::INVALID_ARGUMENT, "input 'data' (raw_input_contents[2]) has 96 bytes"},
      {"unknown datatype", [](auto* r) { r->mutable_inputs(2)->set_datatype("COMPLEX64"); },
       grpc::StatusCode::INVALID_ARGUMENT, "datatype 'COMPLEX64' is not one of"},
      {"mixed raw and typed",
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_int64_contents(1); },
       grpc::StatusCode::INVALID_ARGUMENT, "input 'axes' has typed contents"},
      {"bad parameter", [](auto* r) { (*r->mutable_parameters())["axis"].set_int64_param(1); },
       grpc::StatusCode::INVALID_ARGUMENT, "axis"},
      {"unknown requested output", [](auto* r) { r->add_outputs()->set_name("y"); },
       grpc::StatusCode::INVALID_ARGUMENT, "unknown output 'y'"},
      {"shared memory off",
       [](auto* r) {
         auto& p = *r->mutable_inputs(2)->mutable_parameters();
         p["shared_memory_region"].set_string_param("x");
         p["shared_memory_byte_size"].set_int64_param(96);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "system shared memory is off"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    ModelInferRequest r = good;
    row.edit(&r);
    ModelInferResponse out;
    const grpc::Status st = Infer(r, &out);
    EXPECT_EQ(st.error_code(), row.code) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(row.message));
  }
  ModelInferResponse out;
  EXPECT_TRUE(Infer(good, &out).ok());  // still serving
}

TEST_F(OipE2ETest, StreamAnswersInOrderAndGoesOnAfterABadRequest) {
  Start();
  std::mt19937 rng(::tensorops::testing::TestSeed(2));
  std::vector<ModelInferRequest> requests;
  std::vector<std::string> expected;
  for (const OpCase& c : OpCases()) {
    const Elements e = RandomElements(kDatatypes[10], NumElements(c.data_shape), &rng);  // FP32
    requests.push_back(OipRequest(c, kDatatypes[10], e, false));
    v1::ExecuteResponse native;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_TRUE(native_->Execute(&ctx, NativeRequest(c, kDatatypes[10], e), &native).ok());
    expected.push_back(native.outputs(0).raw_data());
  }
  ModelInferRequest bad = requests[1];
  bad.set_model_name("NoSuchOp");
  requests.insert(requests.begin() + 2, bad);
  expected.insert(expected.begin() + 2, "");

  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = stub_->ModelStreamInfer(&ctx);
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());
  inference::ModelStreamInferResponse response;
  size_t n = 0;
  while (stream->Read(&response)) {
    ASSERT_LT(n, requests.size());
    SCOPED_TRACE(n);
    if (n == 2) {
      EXPECT_THAT(response.error_message(), HasSubstr("NOT_FOUND: unknown model 'NoSuchOp'"));
    } else {
      EXPECT_EQ(response.error_message(), "");
      EXPECT_EQ(response.infer_response().id(), requests[n].id());
      EXPECT_EQ(response.infer_response().raw_output_contents(0), expected[n]);
    }
    ++n;
  }
  EXPECT_EQ(n, requests.size());
  EXPECT_TRUE(stream->Finish().ok());
}

// The protocol's `timeout` parameter (microseconds, as Triton's): a call
// still queued past it is dropped with DEADLINE_EXCEEDED, on ModelInfer and
// per message on ModelStreamInfer (the stream goes on); 0 means none; a
// negative or non-integer value is INVALID_ARGUMENT naming it.
TEST_F(OipE2ETest, TimeoutParameterDropsACallQueuedPastIt) {
  testing::KernelGate gate;
  ASSERT_TRUE(gate.shut_ok());
  Start({gate.Flag()});
  std::mt19937 rng(::tensorops::testing::TestSeed(7));
  const std::vector<OpCase> cases = OpCases();
  const OpCase& c = cases[0];
  const Elements e = RandomElements(kDatatypes[10], NumElements(c.data_shape), &rng);  // FP32
  auto with_timeout = [&](int64_t us) {
    ModelInferRequest r = OipRequest(c, kDatatypes[10], e, false);
    (*r.mutable_parameters())["timeout"].set_int64_param(us);
    return r;
  };
  // The gate opens 1.5 s after each call starts: far past 100 ms.
  auto open_later = [&] {
    return std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      gate.Open();
    });
  };
  {
    std::thread opener = open_later();
    ModelInferResponse out;
    const grpc::Status s = Infer(with_timeout(100000), &out);
    opener.join();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("timeout"));
  }
  {  // Gate open: a generous timeout, and 0 (none), run.
    ModelInferResponse out;
    const grpc::Status s = Infer(with_timeout(60000000), &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    const grpc::Status s0 = Infer(with_timeout(0), &out);
    EXPECT_TRUE(s0.ok()) << s0.error_message();
  }
  {
    ModelInferRequest bad = with_timeout(-1);
    ModelInferResponse out;
    const grpc::Status s = Infer(bad, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("parameter 'timeout' must be an integer >= 0"));
    (*bad.mutable_parameters())["timeout"].set_string_param("1s");
    EXPECT_EQ(Infer(bad, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // A stream: the first message times out in the queue, the second runs.
  testing::KernelGate stream_gate;
  ASSERT_TRUE(stream_gate.shut_ok());
  server_.reset();
  Start({stream_gate.Flag()});
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(with_timeout(100000)));
  ASSERT_TRUE(stream->Write(with_timeout(0)));
  ASSERT_TRUE(stream->WritesDone());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stream_gate.Open();
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_THAT(response.error_message(), HasSubstr("DEADLINE_EXCEEDED"));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  EXPECT_EQ(response.infer_response().outputs_size(), 1);
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

void InShm(inference::ModelInferRequest::InferInputTensor* t, const std::string& region,
           int64_t offset, int64_t size) {
  SetShmParams(t->mutable_parameters(), region, offset, size);
}

void OutShm(ModelInferRequest* r, const std::string& name, const std::string& region,
            int64_t offset, int64_t size) {
  auto* o = r->add_outputs();
  o->set_name(name);
  SetShmParams(o->mutable_parameters(), region, offset, size);
}

grpc::Status Register(GRPCInferenceService::Stub* stub, const std::string& name,
                      const std::string& key, uint64_t offset, uint64_t size,
                      const std::string& token = "") {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  inference::SystemSharedMemoryRegisterRequest r;
  r.set_name(name);
  r.set_key(key);
  r.set_offset(offset);
  r.set_byte_size(size);
  inference::SystemSharedMemoryRegisterResponse out;
  return stub->SystemSharedMemoryRegister(&ctx, r, &out);
}

TEST_F(OipE2ETest, SharedMemoryLifecycle) {
  Start({"--shared_memory=system", "--shared_memory_key_prefix=/tensorops-test-"});
  {
    grpc::ClientContext ctx;
    inference::ServerMetadataResponse md;
    ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &md).ok());
    EXPECT_THAT(md.extensions(), ::testing::Contains("system_shared_memory"));
  }
  ShmObject obj(1 << 20);
  // Registration checks.
  EXPECT_EQ(Register(stub_.get(), "r", "/elsewhere", 0, 64).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Register(stub_.get(), "r", "/tensorops-test-missing", 0, 64).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const grpc::Status too_big = Register(stub_.get(), "r", obj.key(), 4096, 1 << 20);
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(too_big.error_message(),
              HasSubstr("region 'r': offset 4096 + byte_size 1048576 is beyond the end"));
  ASSERT_TRUE(Register(stub_.get(), "r", obj.key(), 0, 1 << 20).ok());
  EXPECT_EQ(Register(stub_.get(), "r", obj.key(), 0, 64).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_shared_memory_regions"), 1);

  // Status lists it.
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusResponse st;
    ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, {}, &st).ok());
    ASSERT_EQ(st.regions().count("r"), 1u);
    EXPECT_EQ(st.regions().at("r").key(), obj.key());
    EXPECT_EQ(st.regions().at("r").byte_size(), 1u << 20);
  }

  // Infer every op, FP32 and BYTES, inputs and output in shared memory; same as Execute.
  std::mt19937 rng(::tensorops::testing::TestSeed(3));
  for (const OpCase& c : OpCases()) {
    for (const Datatype& d : {kDatatypes[10], kDatatypes[12]}) {
      SCOPED_TRACE(absl::StrCat(c.model, " ", d.oip));
      const Elements e = RandomElements(d, NumElements(c.data_shape), &rng);
      v1::ExecuteResponse native;
      grpc::ClientContext nctx;
      SetDeadline(&nctx);
      ASSERT_TRUE(native_->Execute(&nctx, NativeRequest(c, d, e), &native).ok());
      const std::string want = NativeResultRaw(native.outputs(0));
      ModelInferRequest r = OipRequest(c, d, e, false);
      // Move every input's raw bytes into the region, back to back.
      int64_t offset = 0;
      for (int i = 0; i < r.inputs_size(); ++i) {
        const std::string& raw = r.raw_input_contents(i);
        std::memcpy(obj.data() + offset, raw.data(), raw.size());
        InShm(r.mutable_inputs(i), "r", offset, static_cast<int64_t>(raw.size()));
        offset += static_cast<int64_t>(raw.size());
      }
      r.clear_raw_input_contents();
      const std::string out_name = c.model == "onnx.ReverseSequence" ? "Y" : "output";
      OutShm(&r, out_name, "r", 65536, 65536);
      ModelInferResponse out;
      const grpc::Status st = Infer(r, &out);
      ASSERT_TRUE(st.ok()) << st.error_message();
      ASSERT_EQ(out.raw_output_contents_size(), 1);
      EXPECT_EQ(out.raw_output_contents(0), "");
      EXPECT_EQ(std::string(obj.data() + 65536, want.size()), want);
    }
  }

  // Out of bounds for a tensor.
  ModelInferRequest r =
      OipRequest(OpCases()[0], kDatatypes[10], RandomElements(kDatatypes[10], 24, &rng), false);
  r.mutable_raw_input_contents()->DeleteSubrange(2, 1);  // the data input is last
  InShm(r.mutable_inputs(2), "r", (1 << 20) - 8, 96);
  ModelInferResponse out;
  grpc::Status st = Infer(r, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(
      st.error_message(),
      HasSubstr("region 'r' holds 1048576 bytes; offset 1048568 + byte_size 96 does not fit"));

  // Truncated by its owner after registering: a clear error, the server lives on.
  InShm(r.mutable_inputs(2), "r", 4096, 96);
  ASSERT_TRUE(Infer(r, &out).ok());
  obj.Truncate(1024);
  st = Infer(r, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("is gone: its object"));
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
  }

  // Unregister; use after unregister is NOT_FOUND naming the region.
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterRequest u;
    u.set_name("r");
    inference::SystemSharedMemoryUnregisterResponse ur;
    ASSERT_TRUE(stub_->SystemSharedMemoryUnregister(&ctx, u, &ur).ok());
  }
  st = Infer(r, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("no shared memory region named 'r'"));
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_shared_memory_regions"), 0);
}

TEST_F(OipE2ETest, UnregisterWhileCallsUseTheRegion) {
  // Calls keep reading and writing a region while another client unregisters
  // and re-registers it: each call either finds the region (and its result is
  // right) or gets NOT_FOUND; nothing is unmapped under a call, the server
  // lives on and the gauge ends at the right count.
  // Each caller writes its own output area (concurrent calls writing the
  // same bytes would be the caller's own data race, which TSan reports).
  Start({"--shared_memory=system"});
  constexpr int kCallers = 3;
  ShmObject obj(16 << 20);
  const int64_t bytes = 4 << 20;  // UINT8 [1024, 4096], Reverse along axis 0
  for (int64_t i = 0; i < bytes; ++i) obj.data()[i] = static_cast<char>(i / 4096);
  ASSERT_TRUE(Register(stub_.get(), "r", obj.key(), 0, 16 << 20).ok());
  ModelInferRequest r;
  r.set_model_name("Reverse");
  (*r.mutable_parameters())["mode"].set_string_param("index");
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("UINT8");
  data->add_shape(1024);
  data->add_shape(4096);
  InShm(data, "r", 0, bytes);
  auto* axis = r.add_inputs();
  axis->set_name("axis");
  axis->set_datatype("INT64");
  axis->add_shape(1);
  axis->mutable_contents()->add_int64_contents(0);

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, not_found{0}, other{0};
  std::atomic<int> ok_of[kCallers] = {};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      ModelInferRequest mine = r;
      OutShm(&mine, "output", "r", bytes * (1 + t), bytes);
      auto stub = GRPCInferenceService::NewStub(NewChannel(server_->address()));
      while (!stop.load()) {
        grpc::ClientContext ctx;
        SetDeadline(&ctx);
        ModelInferResponse out;
        const grpc::Status st = stub->ModelInfer(&ctx, mine, &out);
        if (st.ok()) {
          ++ok;
          ++ok_of[t];
        } else if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
          ++not_found;
        } else {
          ++other;
          ADD_FAILURE() << st.error_message();
        }
      }
    });
  }
  for (int i = 0; i < 40; ++i) {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterRequest u;  // empty name: all
    inference::SystemSharedMemoryUnregisterResponse ur;
    ASSERT_TRUE(stub_->SystemSharedMemoryUnregister(&ctx, u, &ur).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(Register(stub_.get(), "r", obj.key(), 0, 16 << 20).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop.store(true);
  for (auto& t : callers) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(other.load(), 0);
  // Each caller's last OK call left a complete output: row i of the result
  // is input row 1023 - i.
  for (int t = 0; t < kCallers; ++t) {
    if (ok_of[t].load() == 0) continue;
    for (int64_t row : {int64_t{0}, int64_t{511}, int64_t{1023}}) {
      EXPECT_EQ(static_cast<uint8_t>(obj.data()[bytes * (1 + t) + row * 4096]),
                static_cast<uint8_t>(1023 - row))
          << "caller " << t;
    }
  }
  EXPECT_EQ(testing::ScrapeSample(server_->metrics_port(), "tensorops_shared_memory_regions"), 1);
  std::printf("calls: %d OK, %d NOT_FOUND\n", ok.load(), not_found.load());
}

TEST_F(OipE2ETest, SharedMemoryNeedsTheToken) {
  const std::string dir = ::testing::TempDir();
  const std::string token_file = absl::StrCat(dir, "/oip-token-", getpid());
  std::ofstream(token_file) << "s3cret\n";
  Start({"--shared_memory=system", "--auth_token_file=" + token_file});
  ShmObject obj(4096);
  // Without the token: refused (ServerLive/Ready stay open like health).
  EXPECT_EQ(Register(stub_.get(), "r", obj.key(), 0, 4096).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &ready).ok());
    EXPECT_TRUE(ready.ready());
  }
  ASSERT_TRUE(Register(stub_.get(), "r", obj.key(), 0, 4096, "s3cret").ok());
  std::mt19937 rng(::tensorops::testing::TestSeed(4));
  ModelInferRequest r =
      OipRequest(OpCases()[0], kDatatypes[7], RandomElements(kDatatypes[7], 24, &rng), false);
  ModelInferResponse out;
  EXPECT_EQ(Infer(r, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Infer(r, &out, "s3cret").ok());
  EXPECT_EQ(Infer(r, &out, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer s3cret");
  inference::SystemSharedMemoryStatusResponse st;
  ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, {}, &st).ok());
  EXPECT_EQ(st.regions_size(), 1);
  std::remove(token_file.c_str());
}

TEST_F(OipE2ETest, StatisticsComeFromTheMetrics) {
  Start();
  std::mt19937 rng(::tensorops::testing::TestSeed(5));
  const OpCase roll = OpCases()[0];
  ModelInferResponse out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        Infer(OipRequest(roll, kDatatypes[7], RandomElements(kDatatypes[7], 24, &rng), false), &out)
            .ok());
  }
  ModelInferRequest bad =
      OipRequest(roll, kDatatypes[7], RandomElements(kDatatypes[7], 24, &rng), false);
  bad.mutable_raw_input_contents(2)->pop_back();
  EXPECT_FALSE(Infer(bad, &out).ok());
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest req;
  req.set_name("Roll");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub_->ModelStatistics(&ctx, req, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  const auto& s = stats.model_stats(0);
  EXPECT_EQ(s.name(), "Roll");
  EXPECT_EQ(s.inference_count(), 3u);
  EXPECT_EQ(s.execution_count(), 3u);
  EXPECT_EQ(s.inference_stats().success().count(), 3u);
  EXPECT_EQ(s.inference_stats().fail().count(), 1u);
  EXPECT_GT(s.inference_stats().success().ns(), 0u);
  EXPECT_EQ(s.inference_stats().compute_infer().count(), 3u);
  EXPECT_GT(s.last_inference(), 0u);
  const double ok =
      testing::ScrapeSample(server_->metrics_port(), "tensorops_requests_total",
                            {{"method", "ModelInfer"}, {"op", "Roll"}, {"code", "OK"}});
  EXPECT_EQ(ok, 3);
  const double seconds =
      testing::ScrapeSample(server_->metrics_port(), "tensorops_call_seconds_total",
                            {{"op", "Roll"}, {"result", "success"}});
  EXPECT_NEAR(seconds * 1e9, static_cast<double>(s.inference_stats().success().ns()), 1e3);
  grpc::ClientContext all_ctx;
  inference::ModelStatisticsResponse all;
  ASSERT_TRUE(stub_->ModelStatistics(&all_ctx, {}, &all).ok());
  EXPECT_EQ(all.model_stats_size(), 4);
}

TEST_F(OipE2ETest, DrainTurnsReadyFalseThenUnavailable) {
  Start({"--drain_timeout=5s"});
  {
    // Connected and ready; this probe also starts the drain's quiet period
    // (probes are arrivals), so the not-ready phase lasts while we poll.
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &ready).ok());
    ASSERT_TRUE(ready.ready());
  }
  ASSERT_TRUE(server_->Signal(SIGTERM));
  bool saw_not_ready = false, saw_unavailable = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && !saw_unavailable) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 2);
    inference::ServerReadyResponse ready;
    const grpc::Status st = stub_->ServerReady(&ctx, {}, &ready);
    if (st.ok()) {
      // Once not ready, never ready again.
      if (saw_not_ready) EXPECT_FALSE(ready.ready());
      saw_not_ready |= !ready.ready();
    } else if (st.error_code() != grpc::StatusCode::CANCELLED) {
      // (A probe caught in the server's final shutdown may be CANCELLED; the
      // next one finds the server gone.)
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
      saw_unavailable = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(saw_not_ready);
  EXPECT_TRUE(saw_unavailable);
  EXPECT_EQ(server_->WaitForExit(30000), 0);
}

TEST_F(OipE2ETest, UnixSocket) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/tensorops-oip-", getpid(), ".sock");
  Start({"--listen=unix:" + path});
  auto stub = GRPCInferenceService::NewStub(NewChannel("unix:" + path));
  std::mt19937 rng(::tensorops::testing::TestSeed(6));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  ModelInferResponse out;
  const grpc::Status st = stub->ModelInfer(
      &ctx,
      OipRequest(OpCases()[1], kDatatypes[10], RandomElements(kDatatypes[10], 24, &rng), false),
      &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(out.raw_output_contents(0).size(), 96u);
}

}  // namespace
}  // namespace tensorops
