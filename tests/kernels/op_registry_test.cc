// The registry as the ops' front door: names, aliases, unknown and empty op
// names (semantics.md "Wire behaviour").
#include "kernels/op_registry.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/test_util.h"

namespace tensorops {
namespace test {
namespace {

using ::testing::HasSubstr;

TEST(OpRegistry, RegistersTheFourOps) {
  std::vector<std::string> names;
  for (const auto& def : Builtins().ops()) names.push_back(def->spec.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("Reverse", "ReverseSequence", "Roll",
                                                     "onnx.ReverseSequence"));
}

TEST(OpRegistry, FindsNamesAndAliases) {
  const OpRegistry& r = Builtins();
  struct Row {
    const char* name;
    const char* canonical;
  };
  for (const Row& row :
       {Row{"Reverse", "Reverse"}, Row{"Reverse-1", "Reverse"},
        Row{"ReverseSequence", "ReverseSequence"}, Row{"ReverseSequence-1", "ReverseSequence"},
        Row{"Roll", "Roll"}, Row{"Roll-7", "Roll"},
        Row{"onnx.ReverseSequence", "onnx.ReverseSequence"}}) {
    SCOPED_TRACE(row.name);
    const OpDef* def = r.Find(row.name);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def->spec.name, row.canonical);
  }
  EXPECT_EQ(r.Find("Roll-8"), nullptr);
  EXPECT_EQ(r.Find(""), nullptr);
}

TEST(OpRegistry, InputNamesFollowTheSpecs) {
  const OpRegistry& r = Builtins();
  auto input_names = [&](const char* op) {
    std::vector<std::string> names;
    for (const InputSpec& in : r.Find(op)->spec.inputs) names.push_back(in.name);
    return names;
  };
  EXPECT_THAT(input_names("Reverse"), ::testing::ElementsAre("data", "axis"));
  EXPECT_THAT(input_names("ReverseSequence"), ::testing::ElementsAre("data", "seq_lengths"));
  EXPECT_THAT(input_names("Roll"), ::testing::ElementsAre("data", "shift", "axes"));
  EXPECT_THAT(input_names("onnx.ReverseSequence"),
              ::testing::ElementsAre("input", "sequence_lens"));
}

// semantics: "An unknown op is UNIMPLEMENTED and lists the known ones".
TEST(OpRegistry, UnknownOpIsUnimplementedAndListsKnownOps) {
  const TestTensor data = FromInt64(DType::kInt32, {2}, {1, 2});
  for (const std::string op : {"Transpose", "roll", "Roll-8", "ReverseSequence-10", "onnx.Roll"}) {
    SCOPED_TRACE(op);
    EXPECT_STATUS_CODE(RunOp(op, {data}), absl::StatusCode::kUnimplemented, op, "Reverse",
                       "ReverseSequence", "Roll", "onnx.ReverseSequence");
    EXPECT_STATUS_CODE(PrepareOnly(op, {data}), absl::StatusCode::kUnimplemented, "Roll");
  }
}

// semantics: "Error messages stay short ... never a megabyte-long name."
TEST(OpRegistry, HugeUnknownOpNameGivesShortMessage) {
  const TestTensor data = FromInt64(DType::kInt32, {2}, {1, 2});
  const std::string name(1 << 20, 'R');
  // ExpectStatus checks the message stays under 1 KiB.
  EXPECT_STATUS_CODE(RunOp(name, {data}), absl::StatusCode::kUnimplemented, "RRRR", "Roll");
}

// semantics: "an empty op name ... is INVALID_ARGUMENT."
TEST(OpRegistry, EmptyOpNameIsInvalidArgument) {
  const TestTensor data = FromInt64(DType::kInt32, {2}, {1, 2});
  EXPECT_INVALID(RunOp("", {data}), "op");
  EXPECT_INVALID(RunOp("", {}), "op");
}

// The registry rejects data of no valid element type before any op runs.
TEST(OpRegistry, InvalidDataTypeRejected) {
  TestTensor data = FromInt64(DType::kInt32, {2}, {1, 2});
  data.dtype = DType::kInvalid;
  EXPECT_INVALID(
      PrepareOnly("Roll", {data, ScalarOf(DType::kInt64, 1), ScalarOf(DType::kInt64, 0)}), "Roll",
      "data");
  data.dtype = static_cast<DType>(99);
  EXPECT_INVALID(PrepareOnly("Reverse", {data, Vec(DType::kInt64, {0})}, {{"mode", Str("index")}}),
                 "Reverse", "data");
}

// Output inference: what every built-in op writes, from types and shapes
// alone (null data), equals what its kernel plans for the same call.
TEST(OpRegistry, InferenceMatchesThePlanOfEveryBuiltinOp) {
  const OpRegistry& r = Builtins();
  struct Row {
    const char* name;
    const char* op;
    std::vector<TestTensor> inputs;
    Attrs attrs;
  };
  const std::vector<Row> rows = {
      {"Reverse index",
       "Reverse",
       {Zeros(DType::kFloat32, {2, 3, 4}), Vec(DType::kInt64, {1})},
       {{"mode", Str("index")}}},
      {"Reverse mask",
       "Reverse-1",
       {Zeros(DType::kUInt8, {5, 0}), Vec(DType::kBool, {1, 0})},
       {{"mode", Str("mask")}}},
      {"ReverseSequence",
       "ReverseSequence",
       {Zeros(DType::kInt16, {3, 4, 2}), Vec(DType::kInt32, {1, 2, 3})},
       {{"batch_axis", Int(0)}, {"seq_axis", Int(1)}}},
      {"Roll",
       "Roll-7",
       {Zeros(DType::kComplex64, {7}), ScalarOf(DType::kInt64, 3), ScalarOf(DType::kInt64, 0)},
       {}},
      {"onnx.ReverseSequence",
       "onnx.ReverseSequence",
       {Zeros(DType::kFloat64, {4, 2}), Vec(DType::kInt64, {1, 4})},
       {{"batch_axis", Int(1)}, {"time_axis", Int(0)}}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<TensorView> views, no_data;
    for (const TestTensor& t : row.inputs) {
      views.push_back(t.view());
      no_data.push_back(TensorView{t.dtype, t.shape, nullptr});
    }
    absl::StatusOr<std::vector<TensorType>> inferred = r.InferOutputs(row.op, no_data, row.attrs);
    ASSERT_TRUE(inferred.ok()) << inferred.status();
    absl::StatusOr<PreparedOp> prepared = r.Prepare(row.op, views, row.attrs);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_EQ(inferred->size(), 1u);
    EXPECT_EQ((*inferred)[0], (TensorType{prepared->dtype, prepared->shape}));
    EXPECT_EQ((*inferred)[0].bytes(), prepared->output_bytes());
  }
  // The generic checks come first, as for Prepare.
  EXPECT_EQ(r.InferOutputs("NoSuchOp", {}, {}).status().code(), absl::StatusCode::kUnimplemented);
}

// An op whose kernel plans another output than its inference promised is a
// bug in the op: Prepare says INTERNAL rather than let a caller's budget or
// buffer be wrong.
absl::StatusOr<std::vector<TensorType>> InferTwiceAsLong(absl::Span<const TensorView> inputs,
                                                         const Attrs&) {
  Shape shape = inputs[0].shape;
  shape[0] *= 2;
  return std::vector<TensorType>{TensorType{inputs[0].dtype, shape}};
}

absl::StatusOr<PreparedOp> PrepareCopy(absl::Span<const TensorView> inputs, const Attrs&) {
  const TensorView in = inputs[0];
  return PreparedOp{in.dtype, in.shape, 1, [in](void* out, int64_t, int64_t) {
                      std::memcpy(out, in.data, NumElements(in.shape) * ElementWidth(in.dtype));
                    }};
}

TEST(OpRegistry, PlanDifferentFromInferenceIsInternal) {
  OpRegistry r;
  OpSpec spec;
  spec.name = "Liar";
  spec.inputs = {{"data", "", {DType::kInt8}, 1, 1}};
  spec.outputs = {{"output", ""}};
  r.Register(OpDef{spec, &PrepareCopy, &InferTwiceAsLong});
  TestTensor data = Zeros(DType::kInt8, {3});
  absl::StatusOr<PreparedOp> prepared = r.Prepare("Liar", {data.view()}, {});
  EXPECT_EQ(prepared.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(prepared.status().message()),
              HasSubstr("Liar: the kernel plans an output of INT8 [3]"));
  absl::StatusOr<std::vector<TensorType>> inferred = r.InferOutputs("Liar", {data.view()}, {});
  ASSERT_TRUE(inferred.ok());
  EXPECT_EQ((*inferred)[0].shape, Shape({6}));
}

}  // namespace
}  // namespace test
}  // namespace tensorops
