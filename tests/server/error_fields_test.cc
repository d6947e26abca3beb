// Every INVALID_ARGUMENT a malformed request gets names, in its
// google.rpc.BadRequest, a field of that request (issue 46): the malformed
// requests of the project's tests (tests/e2e/error_details_python_test.py,
// the wire_golden cases, server_e2e_test, oip_codec_test, oip_e2e_test,
// json_binding_test, limits_test, stream_execution_test), made again here as
// a table per door and run through the door's own decoding and its edge (gRPC:
// ToGrpcStatus's grpc-status-details-bin; REST: ErrorJson's "details"). The
// field is resolved against the request, never against the message: for gRPC
// along the protobuf descriptor of ExecuteRequest, ExecuteStreamRequest or
// ModelInferRequest (repeated indices within the request's own sizes, any
// key of a map or a google.protobuf.Struct); for REST along the JSON body
// itself. A few rows are about the body as a whole (malformed JSON, its
// header length): their field is "" and the table says so.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "kernels/field_path.h"
#include "kernels/ops/ops.h"
#include "rapidjson/document.h"
#include "server/grpc/oip_binding.h"
#include "server/http/json_binding.h"
#include "server/http/oip_json.h"
#include "server/oip/oip_codec.h"
#include "server/v1/execution.h"
#include "server/v1/stream_execution.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/status.h"

namespace tensorops {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using inference::ModelInferRequest;

// One step of a path: a name and, if it has one, an index ("shape[1]").
struct Step {
  std::string name;
  int64_t index = -1;
};

// "a.b[2].c" -> {a}, {b, 2}, {c}; false for anything else.
bool SplitPath(const std::string& path, std::vector<Step>* steps) {
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    Step s;
    const size_t open = part.find('[');
    s.name = std::string(part.substr(0, open));
    if (s.name.empty()) return false;
    if (open != absl::string_view::npos) {
      if (part.back() != ']' ||
          !absl::SimpleAtoi(part.substr(open + 1, part.size() - open - 2), &s.index)) {
        return false;
      }
    }
    steps->push_back(s);
  }
  return !steps->empty();
}

// Whether `steps` from `at` name a field of `type` (and, where `msg` is
// known, an index within its repeated field). `then_json`: the OIP
// `parameters.then` parameter holds tensorops.v1 Steps as JSON, so a path
// that goes on into it resolves as ExecuteRequest.then.
bool Resolves(const Descriptor* type, const Message* msg, const std::vector<Step>& steps, size_t at,
              bool then_json, std::string* why) {
  if (at == steps.size()) return true;
  if (type->full_name() == "google.protobuf.Struct") return steps[at].index < 0;
  const Step& s = steps[at];
  const FieldDescriptor* f = type->FindFieldByName(s.name);
  if (f == nullptr) {
    *why = absl::StrCat(type->full_name(), " has no field '", s.name, "'");
    return false;
  }
  if (f->is_map()) {
    // The next step is a key: any key, its value the map's value type.
    if (s.index >= 0 || at + 1 >= steps.size()) return s.index < 0;
    const FieldDescriptor* value = f->message_type()->FindFieldByName("value");
    const Step& key = steps[at + 1];
    if (then_json && key.name == "then" && (key.index >= 0 || at + 2 < steps.size())) {
      std::vector<Step> rest(steps.begin() + at + 1, steps.end());
      return Resolves(v1::ExecuteRequest::descriptor(), nullptr, rest, 0, false, why);
    }
    if (key.index >= 0) return false;
    if (value->message_type() == nullptr) return at + 2 == steps.size();
    return Resolves(value->message_type(), nullptr, steps, at + 2, then_json, why);
  }
  if (s.index >= 0) {
    if (!f->is_repeated()) {
      *why = absl::StrCat(s.name, " is not repeated");
      return false;
    }
    if (msg != nullptr && s.index >= msg->GetReflection()->FieldSize(*msg, f)) {
      *why = absl::StrCat(s.name, "[", s.index, "] is past the request's ",
                          msg->GetReflection()->FieldSize(*msg, f));
      return false;
    }
  }
  if (f->message_type() == nullptr) return at + 1 == steps.size();
  const Message* next = nullptr;
  if (msg != nullptr && (s.index >= 0 || !f->is_repeated())) {
    next = s.index >= 0 ? &msg->GetReflection()->GetRepeatedMessage(*msg, f, s.index)
                        : &msg->GetReflection()->GetMessage(*msg, f);
  }
  if (f->is_repeated() && s.index < 0) return at + 1 == steps.size();
  return Resolves(f->message_type(), next, steps, at + 1, then_json, why);
}

// The BadRequest field of a gRPC error as the door sends it.
std::string GrpcField(const absl::Status& status) {
  const grpc::Status g = ToGrpcStatus(status);
  google::rpc::Status details;
  EXPECT_TRUE(details.ParseFromString(g.error_details())) << status;
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad;
    if (any.UnpackTo(&bad) && bad.field_violations_size() == 1) {
      EXPECT_EQ(bad.field_violations(0).description(), status.message());
      return bad.field_violations(0).field();
    }
  }
  ADD_FAILURE() << "no BadRequest in " << status;
  return "";
}

void ExpectGrpcField(const absl::Status& status, const Message& request, bool whole_request) {
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string field = GrpcField(status);
  SCOPED_TRACE(absl::StrCat("field '", field, "' of: ", status.message()));
  if (whole_request) {
    EXPECT_EQ(field, "");
    return;
  }
  std::vector<Step> steps;
  ASSERT_TRUE(SplitPath(field, &steps));
  std::string why;
  const bool oip = request.GetDescriptor() == ModelInferRequest::descriptor();
  EXPECT_TRUE(Resolves(request.GetDescriptor(), &request, steps, 0, oip, &why)) << why;
}

class ErrorFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterBuiltinOps(&registry_); }
  OpRegistry registry_;
};

// --- The malformed requests, by door. ---

v1::Tensor IntTensor(v1::DataType dtype, std::vector<int64_t> shape, std::vector<int64_t> values) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  for (int64_t v : values) {
    if (dtype == v1::DATA_TYPE_INT64) {
      t.add_int64_data(v);
    } else {
      t.add_int32_data(static_cast<int32_t>(v));
    }
  }
  return t;
}

// Roll of INT32 [2,2] by 1 along axis 0: valid (error_details_python_test's roll()).
v1::ExecuteRequest RollRequest() {
  v1::ExecuteRequest r;
  r.set_op("Roll");
  *r.add_inputs() = IntTensor(v1::DATA_TYPE_INT32, {2, 2}, {1, 2, 3, 4});
  *r.add_inputs() = IntTensor(v1::DATA_TYPE_INT64, {1}, {1});
  *r.add_inputs() = IntTensor(v1::DATA_TYPE_INT64, {1}, {0});
  return r;
}

v1::Step StepOf(const char* op, std::vector<v1::Tensor> inputs) {
  v1::Step s;
  s.set_op(op);
  for (v1::Tensor& t : inputs) *s.add_inputs() = std::move(t);
  return s;
}

struct ExecuteRow {
  const char* what;
  std::function<void(v1::ExecuteRequest*)> edit;
};

// A table, one row per malformed request: over 80 lines, since a list reads
// best whole.
std::vector<ExecuteRow> ExecuteRows() {
  using R = v1::ExecuteRequest;
  const v1::Tensor lengths = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 1});
  return {
      {"bad axis", [](R* r) { r->mutable_inputs(2)->set_int64_data(0, 5); }},
      {"axes[1] out of range",
       [](R* r) {
         *r->mutable_inputs(2) = IntTensor(v1::DATA_TYPE_INT64, {2}, {0, 3});
         *r->mutable_inputs(1) = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 1});
       }},
      {"int32_data count", [](R* r) { r->mutable_inputs(0)->add_int32_data(5); }},
      {"negative dim", [](R* r) { r->mutable_inputs(0)->set_shape(1, -2); }},
      {"no inputs", [](R* r) { r->clear_inputs(); }},
      {"short raw_data",
       [](R* r) {
         v1::Tensor* t = r->mutable_inputs(0);
         t->clear_int32_data();
         t->set_dtype(v1::DATA_TYPE_UINT8);
         t->set_raw_data(std::string(3, '\1'));
       }},
      {"unknown attribute", [](R* r) { (*r->mutable_attrs()->mutable_fields())["speed"]; }},
      {"invalid dtype", [](R* r) { r->mutable_inputs(0)->set_dtype(v1::DataType(99)); }},
      {"two data fields", [](R* r) { r->mutable_inputs(1)->add_int32_data(1); }},
      {"typed field of another type",
       [](R* r) { r->mutable_inputs(0)->set_dtype(v1::DATA_TYPE_FLOAT32); }},
      {"INT8 value out of range",
       [](R* r) {
         r->mutable_inputs(0)->set_dtype(v1::DATA_TYPE_INT8);
         r->mutable_inputs(0)->set_int32_data(2, 300);
       }},
      {"BOOL raw byte",
       [](R* r) {
         v1::Tensor* t = r->mutable_inputs(0);
         t->clear_int32_data();
         t->set_dtype(v1::DATA_TYPE_BOOL);
         t->set_raw_data(std::string("\0\1\2\0", 4));
       }},
      {"STRING in raw_data",
       [](R* r) {
         v1::Tensor* t = r->mutable_inputs(0);
         t->clear_int32_data();
         t->set_dtype(v1::DATA_TYPE_STRING);
         t->set_raw_data("abcd");
       }},
      {"no data", [](R* r) { r->mutable_inputs(0)->clear_int32_data(); }},
      {"rank above the limit",
       [](R* r) {
         for (int i = 0; i < 9; ++i) r->mutable_inputs(0)->add_shape(1);
       }},
      {"shape overflow",
       [](R* r) {
         r->mutable_inputs(0)->set_shape(0, int64_t{1} << 40);
         r->mutable_inputs(0)->set_shape(1, int64_t{1} << 40);
       }},
      {"empty op", [](R* r) { r->clear_op(); }},
      {"shift and axes counts",
       [](R* r) {
         *r->mutable_inputs(1) = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 2});
       }},
      {"axes of a float type",
       [](R* r) {
         v1::Tensor* t = r->mutable_inputs(2);
         t->clear_int64_data();
         t->set_dtype(v1::DATA_TYPE_FLOAT32);
         t->add_float_data(0);
       }},
      {"Reverse without mode",
       [](R* r) {
         r->set_op("Reverse");
         r->mutable_inputs()->RemoveLast();
       }},
      {"Reverse mode a number",
       [](R* r) {
         r->set_op("Reverse");
         r->mutable_inputs()->RemoveLast();
         (*r->mutable_attrs()->mutable_fields())["mode"].set_number_value(1);
       }},
      {"Reverse mask count",
       [](R* r) {
         r->set_op("Reverse");
         r->mutable_inputs()->RemoveLast();
         (*r->mutable_attrs()->mutable_fields())["mode"].set_string_value("mask");
         v1::Tensor* m = r->mutable_inputs(1);
         m->clear_int64_data();
         m->set_dtype(v1::DATA_TYPE_BOOL);
         m->add_bool_data(true);
       }},
      {"ReverseSequence length out of range",
       [](R* r) {
         r->set_op("ReverseSequence");
         r->mutable_inputs()->RemoveLast();
         *r->mutable_inputs(1) = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 3});
       }},
      {"ReverseSequence same axes",
       [](R* r) {
         r->set_op("ReverseSequence");
         r->mutable_inputs()->RemoveLast();
         *r->mutable_inputs(1) = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 1});
         (*r->mutable_attrs()->mutable_fields())["seq_axis"].set_number_value(0);
       }},
      {"onnx time_axis",
       [](R* r) {
         r->set_op("onnx.ReverseSequence");
         r->mutable_inputs()->RemoveLast();
         *r->mutable_inputs(1) = IntTensor(v1::DATA_TYPE_INT64, {2}, {1, 1});
         (*r->mutable_attrs()->mutable_fields())["time_axis"].set_number_value(2);
       }},
      {"chain step attribute",
       [lengths](R* r) {
         v1::Step s = StepOf("ReverseSequence", {lengths});
         (*s.mutable_attrs()->mutable_fields())["seq_axis"].set_number_value(7);
         *r->add_then() = s;
       }},
      {"chain step with too few inputs", [](R* r) { *r->add_then() = StepOf("Reverse", {}); }},
      {"chain step's data",
       [](R* r) {
         v1::Tensor axis = IntTensor(v1::DATA_TYPE_INT64, {1}, {4});
         v1::Step s = StepOf("Reverse", {axis});
         (*s.mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
         *r->add_then() = s;
       }},
      {"chain step's tensor",
       [](R* r) {
         v1::Tensor axis = IntTensor(v1::DATA_TYPE_INT64, {2}, {0});
         *r->add_then() = StepOf("Reverse", {axis});
       }},
      {"chain too long",
       [](R* r) {
         for (int i = 0; i <= kMaxChainSteps; ++i) {
           *r->add_then() = StepOf("Roll", {IntTensor(v1::DATA_TYPE_INT64, {1}, {1}),
                                            IntTensor(v1::DATA_TYPE_INT64, {1}, {0})});
         }
       }},
  };
}

// ExecuteStream's header for the same Roll (stream_execution_test's shape).
v1::StreamHeader RollHeader() {
  v1::StreamHeader h;
  h.set_op("Roll");
  for (int64_t n : {4, 1, 1}) {
    v1::TensorHeader* t = h.add_inputs();
    t->set_dtype(n == 4 ? v1::DATA_TYPE_INT32 : v1::DATA_TYPE_INT64);
    t->add_shape(n);
  }
  return h;
}

struct StreamRow {
  const char* what;
  std::function<void(v1::StreamHeader*)> edit_header;
  std::optional<v1::TensorChunk> chunk;  // set: the header is good, the chunk is not
};

v1::TensorChunk Chunk(uint32_t tensor, uint64_t offset, std::string data) {
  v1::TensorChunk c;
  c.set_tensor(tensor);
  c.set_offset(offset);
  c.set_data(std::move(data));
  return c;
}

std::vector<StreamRow> StreamRows() {
  using H = v1::StreamHeader;
  return {
      {"invalid dtype", [](H* h) { h->mutable_inputs(0)->set_dtype(v1::DataType(99)); }, {}},
      {"STRING", [](H* h) { h->mutable_inputs(0)->set_dtype(v1::DATA_TYPE_STRING); }, {}},
      {"negative dim", [](H* h) { h->mutable_inputs(0)->set_shape(0, -1); }, {}},
      {"rank above the limit",
       [](H* h) {
         for (int i = 0; i < 9; ++i) h->mutable_inputs(0)->add_shape(1);
       },
       {}},
      {"axes of a float type",
       [](H* h) { h->mutable_inputs(2)->set_dtype(v1::DATA_TYPE_FLOAT32); },
       {}},
      {"unknown attribute", [](H* h) { (*h->mutable_attrs()->mutable_fields())["x"]; }, {}},
      {"too few inputs", [](H* h) { h->mutable_inputs()->RemoveLast(); }, {}},
      {"chain step", [](H* h) { *h->add_then() = StepOf("Reverse", {}); }, {}},
      {"chunk of no tensor", [](H*) {}, Chunk(7, 0, "x")},
      {"empty chunk", [](H*) {}, Chunk(0, 0, "")},
      {"chunk out of order", [](H*) {}, Chunk(0, 4, "abcd")},
      {"chunk past the end", [](H*) {}, Chunk(1, 0, std::string(9, '\0'))},
      {"incomplete upload", [](H*) {}, Chunk(0, 0, std::string(4, '\0'))},
  };
}

// Roll of INT32 [2,3] by 1 along axis 1 as ModelInferRequest, raw or typed
// (oip_codec_test's RollRaw()).
ModelInferRequest RollInfer(bool raw) {
  ModelInferRequest r;
  r.set_model_name("Roll");
  const struct {
    const char* name;
    const char* datatype;
    std::vector<int64_t> shape;
  } inputs[] = {{"data", "INT32", {2, 3}}, {"shift", "INT64", {1}}, {"axes", "INT64", {1}}};
  for (const auto& in : inputs) {
    auto* t = r.add_inputs();
    t->set_name(in.name);
    t->set_datatype(in.datatype);
    for (int64_t d : in.shape) t->add_shape(d);
  }
  if (raw) {
    const int32_t data[6] = {1, 2, 3, 4, 5, 6};
    const int64_t one = 1;
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(data), sizeof(data)));
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&one), 8));
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&one), 8));
  } else {
    for (int v : {1, 2, 3, 4, 5, 6}) r.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
    r.mutable_inputs(1)->mutable_contents()->add_int64_contents(1);
    r.mutable_inputs(2)->mutable_contents()->add_int64_contents(1);
  }
  return r;
}

struct InferRow {
  const char* what;
  bool raw;
  std::function<void(ModelInferRequest*)> edit;
};

// A table like ExecuteRows, over 80 lines for the same reason.
std::vector<InferRow> InferRows() {
  using M = ModelInferRequest;
  auto param = [](M* r, const char* key) -> inference::InferParameter& {
    return (*r->mutable_parameters())[key];
  };
  auto input_param = [](M* r, int i, const char* key) -> inference::InferParameter& {
    return (*r->mutable_inputs(i)->mutable_parameters())[key];
  };
  return {
      {"unknown input", true, [](M* r) { r->mutable_inputs(1)->set_name("shifts"); }},
      {"missing input", true,
       [](M* r) {
         r->mutable_inputs()->RemoveLast();
         r->mutable_raw_input_contents()->RemoveLast();
       }},
      {"duplicate input", true, [](M* r) { r->mutable_inputs(2)->set_name("shift"); }},
      {"bad datatype", true, [](M* r) { r->mutable_inputs(0)->set_datatype("FLOAT"); }},
      {"COMPLEX64", true, [](M* r) { r->mutable_inputs(0)->set_datatype("COMPLEX64"); }},
      {"raw size", true, [](M* r) { r->mutable_raw_input_contents(0)->pop_back(); }},
      {"datatype against the raw bytes", true,
       [](M* r) { r->mutable_inputs(0)->set_datatype("INT64"); }},
      {"raw count", true, [](M* r) { r->mutable_raw_input_contents()->RemoveLast(); }},
      {"mixed raw and typed", true,
       [](M* r) { r->mutable_inputs(1)->mutable_contents()->add_int64_contents(1); }},
      {"negative dim", true, [](M* r) { r->mutable_inputs(0)->set_shape(0, -2); }},
      {"rank above the limit", true,
       [](M* r) {
         for (int i = 0; i < 9; ++i) r->mutable_inputs(0)->add_shape(1);
       }},
      {"overflowing shape", true,
       [](M* r) {
         r->mutable_inputs(0)->set_shape(0, int64_t{1} << 40);
         r->mutable_inputs(0)->set_shape(1, int64_t{1} << 40);
       }},
      {"unknown parameter", true, [param](M* r) { param(r, "modes").set_string_param("x"); }},
      {"huge int attribute", true,
       [param](M* r) { param(r, "batch_axis").set_int64_param(int64_t{1} << 60); }},
      {"timeout negative", true, [param](M* r) { param(r, "timeout").set_int64_param(-1); }},
      {"unknown tensor parameter", true,
       [input_param](M* r) { input_param(r, 0, "foo").set_bool_param(true); }},
      {"shm size without region", true,
       [input_param](M* r) { input_param(r, 0, "shared_memory_byte_size").set_int64_param(24); }},
      {"shm while off", true,
       [input_param](M* r) {
         input_param(r, 0, "shared_memory_region").set_string_param("r");
         input_param(r, 0, "shared_memory_byte_size").set_int64_param(24);
       }},
      {"unknown output", true, [](M* r) { r->add_outputs()->set_name("out"); }},
      {"output twice", true,
       [](M* r) {
         r->add_outputs()->set_name("output");
         r->add_outputs()->set_name("output");
       }},
      {"op's check on raw data", true,
       [](M* r) {
         const int64_t five = 5;
         r->set_raw_input_contents(2, std::string(reinterpret_cast<const char*>(&five), 8));
       }},
      {"op's check on typed data", false,
       [](M* r) { r->mutable_inputs(2)->mutable_contents()->set_int64_contents(0, 5); }},
      {"op's type check", false,
       [](M* r) {
         r->mutable_inputs(2)->set_datatype("FP32");
         r->mutable_inputs(2)->mutable_contents()->clear_int64_contents();
         r->mutable_inputs(2)->mutable_contents()->add_fp32_contents(0);
       }},
      {"typed value out of range", false,
       [](M* r) {
         r->mutable_inputs(0)->set_datatype("INT8");
         r->mutable_inputs(0)->mutable_contents()->set_int_contents(2, 300);
       }},
      {"FP16 typed", false, [](M* r) { r->mutable_inputs(0)->set_datatype("FP16"); }},
      {"typed field of another type", false,
       [](M* r) { r->mutable_inputs(0)->set_datatype("FP32"); }},
      {"typed count", false,
       [](M* r) { r->mutable_inputs(0)->mutable_contents()->add_int_contents(7); }},
      {"two typed fields", false,
       [](M* r) { r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }},
      {"no data", false, [](M* r) { r->mutable_inputs(0)->clear_contents(); }},
      {"bad then", true, [param](M* r) { param(r, "then").set_string_param("[{\"op\": "); }},
      {"then not a string", true, [param](M* r) { param(r, "then").set_int64_param(1); }},
      {"then step's attribute", true,
       [param](M* r) {
         param(r, "then").set_string_param(
             R"([{"op": "Reverse", "attrs": {"mode": "sideways"}, "inputs": [)"
             R"({"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [0]}]}])");
       }},
      {"then step's tensor", true,
       [param](M* r) {
         param(r, "then").set_string_param(
             R"([{"op": "Reverse", "inputs": [{"dtype": "DATA_TYPE_INT64", "shape": [2],)"
             R"( "int64_data": [0]}]}])");
       }},
      {"then step's data", true,
       [param](M* r) {
         param(r, "then").set_string_param(
             R"([{"op": "Reverse", "attrs": {"mode": "index"}, "inputs": [)"
             R"({"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [9]}]}])");
       }},
  };
}

// A REST body for Roll with `data` as data's JSON and `axes` as the axes'.
std::string RestBody(const std::string& data, const std::string& axes,
                     const std::string& extra_input = "", const std::string& extra = "") {
  return absl::StrCat(
      R"({"inputs": [{"name": "data", "datatype": "INT32", "shape": [2, 2], "data": )", data,
      R"(}, {"name": "shift", "datatype": "INT64", "shape": [1], "data": [1]}, )",
      R"({"name": "axes", "datatype": "INT64", "shape": [1], "data": )", axes, extra_input, "}]",
      extra, "}");
}

struct RestRow {
  const char* what;
  std::string body;
  std::optional<int64_t> header_length = std::nullopt;
  bool whole_body = false;
};

std::vector<RestRow> RestRows() {
  const std::string ok = "[1, 2, 3, 4]";
  const std::string good = RestBody(ok, "[0]");
  const std::string binary_axes =
      R"({"inputs": [{"name": "data", "datatype": "INT32", "shape": [2, 2], "data": [1, 2, 3, 4]},)"
      R"( {"name": "shift", "datatype": "INT64", "shape": [1], "data": [1]},)"
      R"( {"name": "axes", "datatype": "INT64", "shape": [1],)"
      R"( "parameters": {"binary_data_size": 8}}]})";
  std::vector<RestRow> rows = {
      {"bad axis", RestBody(ok, "[5]")},
      {"bad axis in a binary block", binary_axes + std::string("\5\0\0\0\0\0\0\0", 8),
       static_cast<int64_t>(binary_axes.size())},
      {"binary block of the wrong size", binary_axes + std::string(4, '\0'),
       static_cast<int64_t>(binary_axes.size())},
      {"string element", RestBody(R"([1, "2", 3, 4])", "[0]")},
      {"out of range element", RestBody("[1, 3000000000, 3, 4]", "[0]")},
      {"fraction", RestBody("[1, 2.5, 3, 4]", "[0]")},
      {"object element", RestBody(R"([1, {"a": [1, 2]}, 3, 4])", "[0]")},
      {"null element", RestBody("[1, null, 3, 4]", "[0]")},
      {"count", RestBody("[1, 2, 3, 4, 5, 6]", "[0]")},
      {"nested count", RestBody("[[1, 2], [3]]", "[0]")},
      {"data twice", RestBody(ok, R"([0], "data": [1])")},
      {"more than one source", RestBody(ok, "[0]", R"(, "parameters": {"binary_data_size": 8})")},
      {"unknown input field", RestBody(ok, "[0]", R"(, "contents": {})")},
      {"binary_data_size not an integer",
       RestBody(ok, "[0]", R"(, "parameters": {"binary_data_size": "8"})")},
      {"parameters not an object", RestBody(ok, "[0]", R"(, "parameters": 1)")},
      {"unknown root field", RestBody(ok, "[0]", "", R"(, "inputz": [])")},
      {"id a number", RestBody(ok, "[0]", "", R"(, "id": 7)")},
      {"binary_data_output",
       RestBody(ok, "[0]", "", R"(, "parameters": {"binary_data_output": 1})")},
      {"parameter an array", RestBody(ok, "[0]", "", R"(, "parameters": {"mode": [1]})")},
      {"outputs not an array", RestBody(ok, "[0]", "", R"(, "outputs": 1)")},
      {"output not an object", RestBody(ok, "[0]", "", R"(, "outputs": [1])")},
      {"output without a name", RestBody(ok, "[0]", "", R"(, "outputs": [{}])")},
      {"unknown output field",
       RestBody(ok, "[0]", "", R"(, "outputs": [{"name": "output", "x": 1}])")},
      {"binary_data not a boolean",
       RestBody(ok, "[0]", "",
                R"(, "outputs": [{"name": "output", "parameters": {"binary_data": 1}}])")},
      {"unknown output", RestBody(ok, "[0]", "", R"(, "outputs": [{"name": "y"}])")},
      {"attribute", RestBody(ok, "[0]", "", R"(, "parameters": {"axis": 1})")},
      {"then step",
       RestBody(ok, "[0]", "", R"(, "parameters": {"then": "[{\"op\": \"Reverse\"}]"})")},
      {"bad then", RestBody(ok, "[0]", "", R"(, "parameters": {"then": "[1"})")},
      {"inputs not an array", R"({"inputs": 3})"},
      {"input not an object",
       R"({"inputs": [5, {"name": "data", "datatype": "FP32", "shape": [1], "data": [1]}]})"},
      {"input without a name", R"({"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]})"},
      {"no datatype", R"({"inputs": [{"name": "data", "shape": [1], "data": [1]}]})"},
      {"unknown datatype",
       R"({"inputs": [{"name": "data", "datatype": "FP8", "shape": [1], "data": [1]}]})"},
      {"no shape", R"({"inputs": [{"name": "data", "datatype": "FP32", "data": [1]}]})"},
      {"negative dim",
       R"({"inputs": [{"name": "data", "datatype": "FP32", "shape": [-1], "data": [1]}]})"},
      {"no data", R"({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1]}]})"},
      {"missing input",
       R"({"inputs": [{"name": "data", "datatype": "FP32", "shape": [1], "data": [1]}]})"},
      {"malformed JSON", R"({"inputs": [1, 2,]})", std::nullopt, true},
      {"not an object", "[1]", std::nullopt, true},
      {"header length past the body", good, static_cast<int64_t>(good.size()) + 5, true},
      {"bytes after the JSON", good + "xyz", static_cast<int64_t>(good.size()), true},
  };
  return rows;
}

TEST_F(ErrorFieldsTest, ExecuteErrorsNameAnExecuteRequestField) {
  for (const ExecuteRow& row : ExecuteRows()) {
    SCOPED_TRACE(row.what);
    v1::ExecuteRequest r = RollRequest();
    row.edit(&r);
    RequestLimits limits;
    limits.max_rank = 8;
    auto out = PreparedExecution::Make(registry_, r, limits);
    ASSERT_FALSE(out.ok());
    ExpectGrpcField(out.status(), r, false);
  }
}

TEST_F(ErrorFieldsTest, StreamErrorsNameAnExecuteStreamRequestField) {
  for (const StreamRow& row : StreamRows()) {
    SCOPED_TRACE(row.what);
    v1::ExecuteStreamRequest r;
    *r.mutable_header() = RollHeader();
    row.edit_header(r.mutable_header());
    RequestLimits limits;
    limits.max_rank = 8;
    absl::StatusOr<std::unique_ptr<StreamedExecution>> s =
        StreamedExecution::Begin(registry_, r.header(), limits);
    absl::Status st = s.status();
    v1::ExecuteStreamRequest sent = r;  // the message that carried the field
    if (s.ok() && row.chunk.has_value()) {
      st = (*s)->AddChunk(*row.chunk);
      if (st.ok()) st = (*s)->EndOfInput();
      if (absl::StartsWith(ErrorFieldPath(st).value_or(""), "chunk.")) {
        *sent.mutable_chunk() = *row.chunk;
      }
    }
    ASSERT_FALSE(st.ok());
    ExpectGrpcField(st, sent, false);
  }
}

TEST_F(ErrorFieldsTest, ModelInferErrorsNameAModelInferRequestField) {
  for (const InferRow& row : InferRows()) {
    SCOPED_TRACE(row.what);
    ModelInferRequest r = RollInfer(row.raw);
    row.edit(&r);
    RequestLimits limits;
    limits.max_rank = 8;
    auto out = PrepareModelInfer(registry_, r, limits, nullptr, "");
    ASSERT_FALSE(out.ok());
    ExpectGrpcField(out.status(), r, false);
  }
}

// REST: the field of ErrorJson's "details", walked along the body.
bool ResolvesInJson(const rapidjson::Value& v, const std::vector<Step>& steps, size_t at,
                    std::string* why);

// The number of elements of (possibly nested) JSON data, flattened.
int64_t Flat(const rapidjson::Value& v) {
  if (!v.IsArray()) return 1;
  int64_t n = 0;
  for (const auto& e : v.GetArray()) n += Flat(e);
  return n;
}

bool ResolvesInJson(const rapidjson::Value& v, const std::vector<Step>& steps, size_t at,
                    std::string* why) {
  if (at == steps.size()) return true;
  const Step& s = steps[at];
  if (!v.IsObject()) {
    *why = absl::StrCat("no object holds '", s.name, "'");
    return false;
  }
  auto it = v.FindMember(s.name.c_str());
  if (it == v.MemberEnd()) {
    // A field the error says is missing ("name must be a string", "needs
    // 'binary_data_size'") is still one of the request's: a parameter, or a
    // field an input or output object has (api-rest.md "Infer in JSON").
    const bool in_parameters = at > 0 && steps[at - 1].name == "parameters";
    const std::string parent = at > 0 ? steps[at - 1].name : "";
    const bool known = (parent == "inputs" && (s.name == "name" || s.name == "datatype" ||
                                               s.name == "shape" || s.name == "data")) ||
                       (parent == "outputs" && s.name == "name");
    if (!in_parameters && !known) *why = absl::StrCat("the body has no '", s.name, "'");
    return (in_parameters || known) && s.index < 0 && at + 1 == steps.size();
  }
  const rapidjson::Value& m = it->value;
  if (s.name == "then" && at > 0 && steps[at - 1].name == "parameters" && m.IsString()) {
    std::vector<Step> rest(steps.begin() + at, steps.end());
    return Resolves(v1::ExecuteRequest::descriptor(), nullptr, rest, 0, false, why);
  }
  if (s.index < 0) return ResolvesInJson(m, steps, at + 1, why);
  if (!m.IsArray()) {
    *why = absl::StrCat(s.name, " is not an array");
    return false;
  }
  if (s.name == "data") return s.index < Flat(m) && at + 1 == steps.size();
  if (s.index >= static_cast<int64_t>(m.Size())) {
    *why = absl::StrCat(s.name, "[", s.index, "] is past its ", m.Size());
    return false;
  }
  return ResolvesInJson(m[static_cast<rapidjson::SizeType>(s.index)], steps, at + 1, why);
}

// Parse, then the OIP core, then the error's field as the body's: the
// steps of the REST door's InferCall::Prepare.
absl::Status RestInfer(const OpRegistry& registry, const std::string& body,
                       std::optional<int64_t> header_length) {
  RequestLimits limits;
  limits.max_rank = 8;
  auto parsed = JsonInferRequest::Parse(body, header_length, "Roll", "", limits);
  if (!parsed.ok()) return parsed.status();
  auto prepared = PreparedInfer::Make(registry, (*parsed)->request(), limits, nullptr, "");
  if (prepared.ok()) return absl::OkStatus();
  return MapErrorFieldPath(
      prepared.status(), [&parsed](absl::string_view path) { return (*parsed)->FieldPath(path); });
}

TEST_F(ErrorFieldsTest, RestErrorsNameAFieldOfTheBody) {
  for (const RestRow& row : RestRows()) {
    SCOPED_TRACE(row.what);
    const absl::Status st = RestInfer(registry_, row.body, row.header_length);
    ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    rapidjson::Document answer;
    answer.Parse(ErrorJson(st).c_str());
    ASSERT_TRUE(answer.IsObject() && answer.HasMember("details")) << ErrorJson(st);
    const rapidjson::Value& v = answer["details"][0]["fieldViolations"][0];
    const std::string field = v.HasMember("field") ? v["field"].GetString() : "";
    SCOPED_TRACE(absl::StrCat("field '", field, "' of: ", st.message()));
    if (row.whole_body) {
      EXPECT_EQ(field, "");
      continue;
    }
    std::vector<Step> steps;
    ASSERT_TRUE(SplitPath(field, &steps));
    rapidjson::Document body;
    body.Parse(row.body.substr(0, row.header_length.value_or(row.body.size())).c_str());
    ASSERT_TRUE(body.IsObject());
    std::string why;
    EXPECT_TRUE(ResolvesInJson(body, steps, 0, &why)) << why;
  }
}

// The fields the issue names, exactly: one vocabulary per door, the
// request's own fields.
TEST_F(ErrorFieldsTest, OneVocabularyTheRequestsOwnFields) {
  v1::ExecuteRequest bad_axis = RollRequest();
  bad_axis.mutable_inputs(2)->set_int64_data(0, 5);
  EXPECT_EQ(GrpcField(PreparedExecution::Make(registry_, bad_axis, {}).status()),
            "inputs[2].int64_data[0]");
  ModelInferRequest typed = RollInfer(false);
  typed.mutable_inputs(2)->mutable_contents()->set_int64_contents(0, 5);
  EXPECT_EQ(GrpcField(PrepareModelInfer(registry_, typed, {}, nullptr, "").status()),
            "inputs[2].contents.int64_contents[0]");
  ModelInferRequest raw = RollInfer(true);
  *raw.mutable_raw_input_contents(2) = std::string("\5\0\0\0\0\0\0\0", 8);
  EXPECT_EQ(GrpcField(PrepareModelInfer(registry_, raw, {}, nullptr, "").status()),
            "raw_input_contents[2]");
  ModelInferRequest chain = RollInfer(false);
  (*chain.mutable_parameters())["then"].set_string_param(R"([{"op": "Reverse"}])");
  EXPECT_EQ(GrpcField(PrepareModelInfer(registry_, chain, {}, nullptr, "").status()),
            "parameters.then[0].inputs");
  const absl::Status rest = RestInfer(registry_, RestBody(R"([1, 2, 3, 4])", "[5]"), std::nullopt);
  EXPECT_NE(ErrorJson(rest).find(R"("field":"inputs[2].data[0]")"), std::string::npos)
      << ErrorJson(rest);
}

}  // namespace
}  // namespace tensorops
