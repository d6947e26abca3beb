// ModelInferRequest decoding, ops as models, and encoding, in process: the
// same kernels' results as Execute for typed, raw and shared-memory tensors,
// and a named INVALID_ARGUMENT / NOT_FOUND for each way a request can be wrong.
#include "server/oip/oip_codec.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/grpc/oip_binding.h"
#include "server/v1/execution.h"
#include "tests/harness/raw_bytes.h"
#include "tests/harness/shm_object.h"

namespace tensorops {
namespace {

using ::tensorops::testing::Pack;
using ::tensorops::testing::RawStrings;
using ::tensorops::testing::SetShmParams;
using ::tensorops::testing::ShmObject;

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::HasSubstr;

class OipCodecTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterBuiltinOps(&registry_); }

  absl::StatusOr<ModelInferResponse> Infer(const ModelInferRequest& request,
                                           const ShmRegistry* shm = nullptr,
                                           const std::string& owner = "") {
    auto prepared = PrepareModelInfer(registry_, request, RequestLimits(), shm, owner);
    if (!prepared.ok()) return prepared.status();
    ModelInferResponse response;
    absl::Status st = RunModelInfer(**prepared, &response);
    if (!st.ok()) return st;
    return response;
  }

  OpRegistry registry_;
};

// A Roll request with raw INT32 data [2,3] shifted by 1 along axis 1.
ModelInferRequest RollRaw() {
  ModelInferRequest r;
  r.set_model_name("Roll");
  r.set_id("req-7");
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("INT32");
  data->add_shape(2);
  data->add_shape(3);
  auto* shift = r.add_inputs();
  shift->set_name("shift");
  shift->set_datatype("INT64");
  shift->add_shape(1);
  auto* axes = r.add_inputs();
  axes->set_name("axes");
  axes->set_datatype("INT64");
  axes->add_shape(1);
  r.add_raw_input_contents(Pack<int32_t>({1, 2, 3, 4, 5, 6}));
  r.add_raw_input_contents(Pack<int64_t>({1}));
  r.add_raw_input_contents(Pack<int64_t>({1}));
  return r;
}

TEST_F(OipCodecTest, DatatypeStringsRoundTrip) {
  int named = 0;
  for (DType d : AllDTypes()) {
    const char* name = OipDatatype(d);
    if (name == nullptr) continue;
    ++named;
    EXPECT_EQ(DTypeFromOip(name), d) << name;
  }
  EXPECT_EQ(named, 14);
  EXPECT_EQ(DTypeFromOip("BYTES"), DType::kString);
  EXPECT_EQ(DTypeFromOip("FP16"), DType::kFloat16);
  EXPECT_EQ(DTypeFromOip("fp32"), DType::kInvalid);
  EXPECT_EQ(OipDatatype(DType::kComplex64), nullptr);
}

TEST_F(OipCodecTest, RollRawMatchesExecute) {
  absl::StatusOr<ModelInferResponse> r = Infer(RollRaw());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name(), "Roll");
  EXPECT_EQ(r->model_version(), "1");
  EXPECT_EQ(r->id(), "req-7");
  ASSERT_EQ(r->outputs_size(), 1);
  EXPECT_EQ(r->outputs(0).name(), "output");
  EXPECT_EQ(r->outputs(0).datatype(), "INT32");
  EXPECT_THAT(r->outputs(0).shape(), ::testing::ElementsAre(2, 3));
  ASSERT_EQ(r->raw_output_contents_size(), 1);

  v1::ExecuteRequest native;
  native.set_op("Roll");
  auto* d = native.add_inputs();
  d->set_dtype(v1::DATA_TYPE_INT32);
  d->add_shape(2);
  d->add_shape(3);
  d->set_raw_data(Pack<int32_t>({1, 2, 3, 4, 5, 6}));
  for (int i = 0; i < 2; ++i) {
    auto* t = native.add_inputs();
    t->set_dtype(v1::DATA_TYPE_INT64);
    t->add_shape(1);
    t->set_raw_data(Pack<int64_t>({1}));
  }
  v1::ExecuteResponse expected;
  ASSERT_TRUE(Execute(registry_, native, &expected).ok());
  EXPECT_EQ(r->raw_output_contents(0), expected.outputs(0).raw_data());
  EXPECT_EQ(r->raw_output_contents(0), Pack<int32_t>({3, 1, 2, 6, 4, 5}));
}

TEST_F(OipCodecTest, InputsInAnyOrderAndTyped) {
  ModelInferRequest r;
  r.set_model_name("Roll");
  r.set_model_version("1");
  auto* axes = r.add_inputs();
  axes->set_name("axes");
  axes->set_datatype("INT64");
  axes->mutable_contents()->add_int64_contents(0);
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("INT8");
  data->add_shape(4);
  for (int v : {1, -2, 3, -4}) data->mutable_contents()->add_int_contents(v);
  auto* shift = r.add_inputs();
  shift->set_name("shift");
  shift->set_datatype("INT32");
  shift->mutable_contents()->add_int_contents(-1);
  absl::StatusOr<ModelInferResponse> out = Infer(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->outputs(0).datatype(), "INT8");
  EXPECT_EQ(out->raw_output_contents(0), Pack<int8_t>({-2, 3, -4, 1}));
}

TEST_F(OipCodecTest, BytesTypedAndRawBothWays) {
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw" : "typed");
    ModelInferRequest r;
    r.set_model_name("Reverse");
    (*r.mutable_parameters())["mode"].set_string_param("index");
    auto* data = r.add_inputs();
    data->set_name("data");
    data->set_datatype("BYTES");
    data->add_shape(3);
    auto* axis = r.add_inputs();
    axis->set_name("axis");
    axis->set_datatype("INT64");
    axis->add_shape(1);
    const std::vector<std::string> values = {"a", "", std::string("x\0y", 3)};
    if (raw) {
      r.add_raw_input_contents(RawStrings(values));
      r.add_raw_input_contents(Pack<int64_t>({0}));
    } else {
      for (const auto& v : values) data->mutable_contents()->add_bytes_contents(v);
      axis->mutable_contents()->add_int64_contents(0);
    }
    absl::StatusOr<ModelInferResponse> out = Infer(r);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->outputs(0).datatype(), "BYTES");
    EXPECT_EQ(out->raw_output_contents(0), RawStrings({std::string("x\0y", 3), "", "a"}));
  }
}

struct BadCase {
  const char* name;
  std::function<void(ModelInferRequest*)> edit;
  absl::StatusCode code;
  const char* message;
};

TEST_F(OipCodecTest, BadRequestsNameWhatIsWrong) {
  const std::vector<BadCase> cases = {
      {"unknown model", [](auto* r) { r->set_model_name("Rol"); }, absl::StatusCode::kNotFound,
       "unknown model 'Rol'; the models are ops: Reverse"},
      {"unknown version", [](auto* r) { r->set_model_version("2"); }, absl::StatusCode::kNotFound,
       "has no version '2'"},
      {"unknown input", [](auto* r) { r->mutable_inputs(1)->set_name("shifts"); },
       absl::StatusCode::kInvalidArgument, "unknown input 'shifts' for model Roll"},
      {"missing input",
       [](auto* r) {
         r->mutable_inputs()->RemoveLast();
         r->mutable_raw_input_contents()->RemoveLast();
       },
       absl::StatusCode::kInvalidArgument, "missing input 'axes'"},
      {"duplicate input", [](auto* r) { r->mutable_inputs(2)->set_name("shift"); },
       absl::StatusCode::kInvalidArgument, "input 'shift' appears twice"},
      {"bad datatype", [](auto* r) { r->mutable_inputs(0)->set_datatype("FLOAT"); },
       absl::StatusCode::kInvalidArgument, "input 'data': datatype 'FLOAT' is not one of"},
      {"raw size", [](auto* r) { r->mutable_raw_input_contents(0)->pop_back(); },
       absl::StatusCode::kInvalidArgument, "input 'data' (raw_input_contents[0]) has 23 bytes"},
      {"raw count", [](auto* r) { r->mutable_raw_input_contents()->RemoveLast(); },
       absl::StatusCode::kInvalidArgument, "raw_input_contents has 2 entries but 3 inputs"},
      {"mixed raw and typed",
       [](auto* r) { r->mutable_inputs(1)->mutable_contents()->add_int64_contents(1); },
       absl::StatusCode::kInvalidArgument, "input 'shift' has typed contents but the request"},
      {"negative dim", [](auto* r) { r->mutable_inputs(0)->set_shape(0, -2); },
       absl::StatusCode::kInvalidArgument, "input 'data'.shape"},
      {"unknown parameter",
       [](auto* r) { (*r->mutable_parameters())["modes"].set_string_param("x"); },
       absl::StatusCode::kInvalidArgument, "modes"},
      {"huge int attribute",
       [](auto* r) { (*r->mutable_parameters())["batch_axis"].set_int64_param(int64_t{1} << 60); },
       absl::StatusCode::kInvalidArgument,
       "parameter 'batch_axis' = 1152921504606846976 is out of range"},
      {"unknown tensor parameter",
       [](auto* r) { (*r->mutable_inputs(0)->mutable_parameters())["foo"].set_bool_param(true); },
       absl::StatusCode::kInvalidArgument, "input 'data': unknown parameter 'foo'"},
      {"shm while off",
       [](auto* r) {
         auto& p = *r->mutable_inputs(0)->mutable_parameters();
         p["shared_memory_region"].set_string_param("r");
         p["shared_memory_byte_size"].set_int64_param(24);
       },
       absl::StatusCode::kInvalidArgument, "system shared memory is off"},
      {"unknown output", [](auto* r) { r->add_outputs()->set_name("out"); },
       absl::StatusCode::kInvalidArgument,
       "unknown output 'out' for model Roll; its outputs are 'output'"},
      {"op's own check (axis out of range)",
       [](auto* r) { *r->mutable_raw_input_contents(2) = Pack<int64_t>({5}); },
       absl::StatusCode::kInvalidArgument, "Roll: axes[0] = 5 is out of range"},
      {"rank limit",
       [](auto* r) {
         auto* d = r->mutable_inputs(0);
         for (int i = 0; i < 40; ++i) d->add_shape(1);
       },
       absl::StatusCode::kInvalidArgument, "--max_rank"},
      {"overflowing shape",
       [](auto* r) {
         auto* d = r->mutable_inputs(0);
         d->set_shape(0, int64_t{1} << 40);
         d->set_shape(1, int64_t{1} << 40);
       },
       absl::StatusCode::kInvalidArgument, "input 'data'.shape"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    ModelInferRequest r = RollRaw();
    c.edit(&r);
    absl::StatusOr<ModelInferResponse> out = Infer(r);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), c.code) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.message));
    EXPECT_LT(out.status().message().size(), 1024u);
  }
}

TEST_F(OipCodecTest, ParametersAreCheckedLikeExecuteAttrs) {
  ModelInferRequest r;
  r.set_model_name("ReverseSequence");
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("FP32");
  data->add_shape(2);
  data->add_shape(2);
  for (float v : {1.f, 2.f, 3.f, 4.f}) data->mutable_contents()->add_fp32_contents(v);
  auto* len = r.add_inputs();
  len->set_name("seq_lengths");
  len->set_datatype("INT64");
  len->add_shape(2);
  len->mutable_contents()->add_int64_contents(2);
  len->mutable_contents()->add_int64_contents(1);
  auto& params = *r.mutable_parameters();
  params["sequence_id"].set_int64_param(9);  // the protocol's own: ignored
  params["priority"].set_int64_param(1);
  absl::StatusOr<ModelInferResponse> out = Infer(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->raw_output_contents(0), Pack<float>({2, 1, 3, 4}));

  params["seq_axis"].set_string_param("1");
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("attribute 'seq_axis' must be an integer, got a string"));
  params["seq_axis"].set_double_param(0.5);
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("must be a whole number"));
  params["seq_axis"].set_int64_param(0);
  params["batch_axis"].set_int64_param(0);
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("batch_axis"));
}

TEST_F(OipCodecTest, TypedErrorsUseTheProtocolsFieldNames) {
  ModelInferRequest r = RollRaw();
  r.clear_raw_input_contents();
  r.mutable_inputs(0)->set_datatype("INT8");
  for (int v : {1, 2, 300, 4, 5, 6}) r.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
  r.mutable_inputs(1)->mutable_contents()->add_int64_contents(1);
  r.mutable_inputs(2)->mutable_contents()->add_int64_contents(1);
  absl::StatusOr<ModelInferResponse> out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("input 'data'.contents.int_contents[2] = 300 is out of range"));

  r.mutable_inputs(0)->set_datatype("FP16");
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("FP16 has no typed contents field"));

  r.mutable_inputs(0)->set_datatype("FP32");
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("contents.int_contents cannot carry FLOAT32 values"));
}

// Typed contents decode straight into kernel tensors (server/grpc/oip_binding.cc)
// with the native codec's checks, worded in the protocol's field names.
TEST_F(OipCodecTest, TypedContentsDecodeWithExactMessages) {
  ModelInferRequest r = RollRaw();
  r.clear_raw_input_contents();
  r.mutable_inputs(0)->set_datatype("FP32");
  auto* data = r.mutable_inputs(0)->mutable_contents();
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f}) data->add_fp32_contents(v);
  r.mutable_inputs(1)->mutable_contents()->add_int64_contents(1);
  r.mutable_inputs(2)->mutable_contents()->add_int64_contents(1);
  absl::StatusOr<ModelInferResponse> out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(std::string(out.status().message()),
            "input 'data'.contents.fp32_contents has 5 values but shape [2,3] needs 6");

  data->add_fp32_contents(6.f);
  out = Infer(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->raw_output_contents(0), Pack<float>({3, 1, 2, 6, 4, 5}));

  data->add_int_contents(1);
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(std::string(out.status().message()),
            "input 'data' sets both contents.fp32_contents and contents.int_contents; set exactly "
            "one data field");

  data->clear_fp32_contents();
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(std::string(out.status().message()),
            "input 'data'.contents.int_contents cannot carry FLOAT32 values; use "
            "contents.fp32_contents or raw_input_contents");

  data->Clear();
  out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(std::string(out.status().message()),
            "input 'data' has no data: set raw_input_contents or contents.fp32_contents");
}

TEST_F(OipCodecTest, MalformedRawBytes) {
  StringRef refs[2];
  const std::string good = RawStrings({"ab", "c"});
  EXPECT_TRUE(ParseRawBytes(good, 2, "t", refs).ok());
  EXPECT_THAT(std::string(ParseRawBytes(good.substr(0, 2), 1, "t", refs).message()),
              HasSubstr("BYTES element 0 of 1: its 4-byte length is cut off"));
  EXPECT_THAT(std::string(ParseRawBytes(good.substr(0, 5), 1, "t", refs).message()),
              HasSubstr("BYTES element 0 claims 2 bytes but only 1 remain"));
  EXPECT_THAT(std::string(ParseRawBytes(good, 1, "t", refs).message()),
              HasSubstr("has 5 bytes after its 1 BYTES elements"));
  std::string huge(4, '\xff');
  EXPECT_FALSE(ParseRawBytes(huge, 1, "t", refs).ok());
}

TEST_F(OipCodecTest, FewBytesCannotClaimAHugeBytesShape) {
  ModelInferRequest r;
  r.set_model_name("Reverse");
  (*r.mutable_parameters())["mode"].set_string_param("index");
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("BYTES");
  data->add_shape(int64_t{1} << 24);  // 256 MiB of references if allocated
  auto* axis = r.add_inputs();
  axis->set_name("axis");
  axis->set_datatype("INT64");
  axis->add_shape(1);
  r.add_raw_input_contents(RawStrings({"a", "b"}));
  r.add_raw_input_contents(Pack<int64_t>({0}));
  absl::StatusOr<ModelInferResponse> out = Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("has 10 bytes, too few for 16777216 BYTES elements"));
}

TEST_F(OipCodecTest, ModelLookupAndMetadata) {
  EXPECT_TRUE(FindModel(registry_, "Roll", "").ok());
  EXPECT_TRUE(FindModel(registry_, "onnx.ReverseSequence", "1").ok());
  EXPECT_EQ(FindModel(registry_, "Roll", "0").status().code(), absl::StatusCode::kNotFound);
  inference::ModelMetadataResponse md;
  DescribeModel(**FindModel(registry_, "Reverse", ""), &md);
  EXPECT_EQ(md.name(), "Reverse");
  ASSERT_EQ(md.inputs_size(), 2);
  EXPECT_EQ(md.inputs(0).name(), "data");
  EXPECT_EQ(md.inputs(0).datatype(), "FP32");
  EXPECT_THAT(md.inputs(0).shape(), ::testing::ElementsAre(-1));
  EXPECT_EQ(md.inputs(1).name(), "axis");
  EXPECT_EQ(md.inputs(1).datatype(), "INT64");
  EXPECT_THAT(md.inputs(1).shape(), ::testing::ElementsAre(-1));
  ASSERT_EQ(md.outputs_size(), 1);
  EXPECT_EQ(md.outputs(0).name(), "output");
}

std::string TestKey(const std::string& what) {
  return absl::StrCat("/tensorops-test-", getpid(), "-", what);
}

void UseShm(inference::ModelInferRequest::InferInputTensor* t, const std::string& region,
            int64_t offset, int64_t size) {
  SetShmParams(t->mutable_parameters(), region, offset, size);
}

TEST_F(OipCodecTest, SharedMemoryInAndOut) {
  ShmObject obj(4096, TestKey("io"));
  ShmRegistry shm({true, "/tensorops-test-", 16});
  ASSERT_TRUE(shm.Register("tok", "r", TestKey("io"), 0, 4096).ok());
  const std::string data = Pack<int32_t>({1, 2, 3, 4, 5, 6});
  std::memcpy(obj.data() + 100, data.data(), data.size());
  ModelInferRequest r = RollRaw();
  // data from shared memory (skipped when raw entries are matched), output to it.
  r.mutable_raw_input_contents()->DeleteSubrange(0, 1);
  UseShm(r.mutable_inputs(0), "r", 100, 24);
  auto* out = r.add_outputs();
  out->set_name("output");
  auto& op = *out->mutable_parameters();
  SetShmParams(&op, "r", 1000, 24);
  absl::StatusOr<ModelInferResponse> res = Infer(r, &shm, "tok");
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->outputs(0).datatype(), "INT32");
  ASSERT_EQ(res->raw_output_contents_size(), 1);
  EXPECT_EQ(res->raw_output_contents(0), "");  // the data is in shared memory
  EXPECT_EQ(std::string(obj.data() + 1000, 24), Pack<int32_t>({3, 1, 2, 6, 4, 5}));

  // Another token sees no such region.
  res = Infer(r, &shm, "other");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("input 'data': no shared memory region named 'r'"));

  // Out of the region's bounds.
  UseShm(r.mutable_inputs(0), "r", 4090, 24);
  res = Infer(r, &shm, "tok");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("region 'r' holds 4096 bytes; offset 4090 + byte_size 24 does not fit"));

  // Size disagreeing with the shape.
  UseShm(r.mutable_inputs(0), "r", 100, 20);
  res = Infer(r, &shm, "tok");
  ASSERT_FALSE(res.ok());
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("input 'data': shared memory region 'r': shared_memory_byte_size is 20 "
                        "but shape [2,3] of INT32 needs 24"));

  // Output overlapping the data input it is computed from.
  UseShm(r.mutable_inputs(0), "r", 1000, 24);
  res = Infer(r, &shm, "tok");
  ASSERT_FALSE(res.ok());
  EXPECT_THAT(std::string(res.status().message()), HasSubstr("overlaps input 'data'"));

  // Output too small.
  UseShm(r.mutable_inputs(0), "r", 100, 24);
  op["shared_memory_byte_size"].set_int64_param(8);
  res = Infer(r, &shm, "tok");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("shared memory region 'r': shared_memory_byte_size is 8 but the output"));
  EXPECT_THAT(std::string(res.status().message()), HasSubstr("needs 24"));

  // Output out of the region's bounds (issue 21: every region error names it).
  op["shared_memory_byte_size"].set_int64_param(24);
  op["shared_memory_offset"].set_int64_param(4090);
  res = Infer(r, &shm, "tok");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("shared memory region 'r' holds 4096 bytes; offset 4090 + byte_size 24"));
}

TEST_F(OipCodecTest, TruncatedObjectIsAnErrorNotACrash) {
  ShmObject obj(1 << 20, TestKey("trunc"));
  ShmRegistry shm({true, "", 16});
  ASSERT_TRUE(shm.Register("", "r", TestKey("trunc"), 0, 1 << 20).ok());
  ModelInferRequest r = RollRaw();
  r.mutable_raw_input_contents()->DeleteSubrange(0, 1);
  UseShm(r.mutable_inputs(0), "r", 0, 24);
  ASSERT_TRUE(Infer(r, &shm).ok());
  obj.Truncate(4096);
  absl::StatusOr<ModelInferResponse> res = Infer(r, &shm);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(res.status().message()),
              HasSubstr("shared memory region 'r' is gone: its object"));
}

TEST_F(OipCodecTest, TruncatedWhilePreparedIsCaught) {
  // The race fstat cannot close: the object shrinks after the checks, before
  // the kernel reads it. The SIGBUS guard turns the fault into an error.
  ShmObject obj(1 << 20, TestKey("race"));
  ShmRegistry shm({true, "", 16});
  ASSERT_TRUE(shm.Register("", "r", TestKey("race"), 0, 1 << 20).ok());
  ModelInferRequest r;
  r.set_model_name("Roll");
  auto* data = r.add_inputs();
  data->set_name("data");
  data->set_datatype("UINT8");
  data->add_shape(1 << 20);
  UseShm(data, "r", 0, 1 << 20);
  for (const char* n : {"shift", "axes"}) {
    auto* t = r.add_inputs();
    t->set_name(n);
    t->set_datatype("INT64");
    t->mutable_contents()->add_int64_contents(0);
  }
  auto prepared = PrepareModelInfer(registry_, r, RequestLimits(), &shm, "");
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  obj.Truncate(0);
  ModelInferResponse response;
  absl::Status st = RunModelInfer(**prepared, &response);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("truncated by its owner while the op ran"));
}

}  // namespace
}  // namespace tensorops
