// kernels/field_path.h: an INVALID_ARGUMENT's field path made where the error
// is made, completed by prefixes and mapped on the way out.
#include "kernels/field_path.h"

#include "gtest/gtest.h"

namespace tensorops {
namespace {

TEST(FieldPathTest, MadeCarriedAndOnlyOnInvalidArgument) {
  const absl::Status s = InvalidArgumentAt("attrs.mode", "Reverse: attribute 'mode' ...");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Reverse: attribute 'mode' ...");
  EXPECT_EQ(ErrorFieldPath(s), "attrs.mode");
  EXPECT_EQ(ErrorFieldPath(absl::InvalidArgumentError("inputs[0] bad")), std::nullopt);
  EXPECT_EQ(ErrorFieldPath(WithErrorFieldPath(absl::NotFoundError("x"), "inputs")), std::nullopt);
  EXPECT_EQ(WithErrorFieldPath(absl::OkStatus(), "inputs"), absl::OkStatus());
}

TEST(FieldPathTest, PrefixCompletesARelativePath) {
  // A helper names a part; its caller knows the whole.
  EXPECT_EQ(ErrorFieldPath(PrefixErrorFieldPath(InvalidArgumentAt("[1]", "m"), "inputs[0].shape")),
            "inputs[0].shape[1]");
  // Made without a path: about the prefix's field as a whole.
  EXPECT_EQ(ErrorFieldPath(PrefixErrorFieldPath(absl::InvalidArgumentError("m"), "inputs[2]")),
            "inputs[2]");
  EXPECT_EQ(PrefixErrorFieldPath(absl::OkStatus(), "inputs"), absl::OkStatus());
  const absl::Status other = absl::ResourceExhaustedError("m");
  EXPECT_EQ(PrefixErrorFieldPath(other, "inputs"), other);
  absl::StatusOr<int> v =
      AtField(absl::StatusOr<int>(InvalidArgumentAt(".dtype", "m")), "inputs[1]");
  EXPECT_EQ(ErrorFieldPath(v.status()), "inputs[1].dtype");
  EXPECT_EQ(*AtField(absl::StatusOr<int>(3), "inputs[1]"), 3);
}

TEST(FieldPathTest, MapKeepsTheMessageAndCode) {
  const absl::Status s =
      MapErrorFieldPath(InvalidArgumentAt("inputs[2].data[0]", "Roll: axes[0] = 5"),
                        [](absl::string_view p) { return std::string("inputs[2].int64_data[0]"); });
  EXPECT_EQ(s.message(), "Roll: axes[0] = 5");
  EXPECT_EQ(ErrorFieldPath(s), "inputs[2].int64_data[0]");
  // Nothing to map: as it is.
  int calls = 0;
  MapErrorFieldPath(absl::InvalidArgumentError("x"), [&calls](absl::string_view) {
    ++calls;
    return std::string();
  });
  EXPECT_EQ(calls, 0);
}

TEST(FieldPathTest, SplitIndexedPath) {
  int64_t i = -1;
  absl::string_view rest;
  ASSERT_TRUE(SplitIndexedPath("inputs[12].data[3]", "inputs", &i, &rest));
  EXPECT_EQ(i, 12);
  EXPECT_EQ(rest, ".data[3]");
  ASSERT_TRUE(SplitLeadingIndex("[3]", &i, &rest));
  EXPECT_EQ(i, 3);
  EXPECT_EQ(rest, "");
  EXPECT_FALSE(SplitIndexedPath("inputs", "inputs", &i, &rest));
  EXPECT_FALSE(SplitIndexedPath("inputs[]", "inputs", &i, &rest));
  EXPECT_FALSE(SplitIndexedPath("inputs[-1]", "inputs", &i, &rest));
  EXPECT_FALSE(SplitIndexedPath("then[0]", "inputs", &i, &rest));
  rest = ".data[3]";
  EXPECT_TRUE(ConsumeDataPath(&rest));
  EXPECT_EQ(rest, "[3]");
  rest = ".datatype";
  EXPECT_FALSE(ConsumeDataPath(&rest));
  EXPECT_EQ(rest, ".datatype");
}

}  // namespace
}  // namespace tensorops
