// The registry as the ops' front door: names, aliases, unknown and empty op
// names (semantics.md "Wire behaviour").
#include "kernels/op_registry.h"

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

}  // namespace
}  // namespace test
}  // namespace tensorops
