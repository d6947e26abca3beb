// wire/raw_fields.h and wire/proto_check.h against protobuf's own encoding
// and parser: the bytes fields outside the message, read across every way
// of cutting the bytes into segments, and a garbage body's reason.
#include "wire/raw_fields.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "kernels/field_path.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/proto_check.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

v1::ExecuteResponse TwoOutputs() {
  v1::ExecuteResponse r;
  v1::Tensor* a = r.add_outputs();
  a->set_dtype(v1::DATA_TYPE_UINT8);
  a->add_shape(3);
  a->add_shape(100);
  std::string bytes(300, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  a->set_raw_data(bytes);
  v1::Tensor* b = r.add_outputs();  // typed, no raw_data
  b->set_dtype(v1::DATA_TYPE_INT32);
  b->add_shape(2);
  b->add_int32_data(-5);
  b->add_int32_data(7);
  return r;
}

// `bytes` cut at every `step` bytes (the last segment shorter).
std::vector<absl::string_view> Cut(const std::string& bytes, size_t step) {
  std::vector<absl::string_view> out;
  for (size_t i = 0; i < bytes.size(); i += step) {
    out.emplace_back(bytes.data() + i, std::min(step, bytes.size() - i));
  }
  return out;
}

TEST(RawFieldsTest, LengthDelimitedIsProtobufs) {
  for (uint64_t len : {0ull, 1ull, 127ull, 128ull, 16383ull, 16384ull, 1ull << 31}) {
    v1::Tensor t;
    std::string expect;
    // Key 0x1a (field 3, length-delimited) and the varint, as protobuf writes them.
    google::protobuf::io::StringOutputStream raw(&expect);
    {
      google::protobuf::io::CodedOutputStream out(&raw);
      out.WriteTag(3 << 3 | 2);
      out.WriteVarint64(len);
    }
    std::string got;
    AppendLengthDelimited(3, len, &got);
    EXPECT_EQ(got, expect) << len;
  }
}

TEST(RawFieldsTest, ParsesAsProtobufAcrossEverySegmentation) {
  const v1::ExecuteResponse want = TwoOutputs();
  const std::string bytes = want.SerializeAsString();
  for (size_t step = 1; step <= bytes.size(); ++step) {
    SegmentCursor cursor(Cut(bytes, step));
    v1::ExecuteResponse got;
    ASSERT_TRUE(ParseWithBytesOutside(&cursor, cursor.remaining(), 1, 3, &got)) << step;
    EXPECT_EQ(got.SerializeAsString(), bytes) << step;
    EXPECT_EQ(cursor.remaining(), 0);
  }
}

TEST(RawFieldsTest, LastRawDataWinsAsInProtobuf) {
  // Two raw_data values in one tensor (a concatenation of encodings):
  // protobuf keeps the last; so must the split.
  v1::Tensor first;
  first.set_raw_data("aaaa");
  v1::Tensor second;
  second.set_raw_data("bb");
  std::string tensor = first.SerializeAsString() + second.SerializeAsString();
  std::string bytes;
  AppendLengthDelimited(1, tensor.size(), &bytes);
  bytes += tensor;
  v1::ExecuteResponse want;
  ASSERT_TRUE(want.ParseFromString(bytes));
  SegmentCursor cursor(Cut(bytes, 3));
  v1::ExecuteResponse got;
  ASSERT_TRUE(ParseWithBytesOutside(&cursor, cursor.remaining(), 1, 3, &got));
  EXPECT_EQ(got.outputs(0).raw_data(), want.outputs(0).raw_data());
  EXPECT_EQ(got.outputs(0).raw_data(), "bb");
}

TEST(RawFieldsTest, RejectsCutOffAndOverlongBodies) {
  const std::string bytes = TwoOutputs().SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{2}, size_t{10}, bytes.size() - 1}) {
    const std::string head = bytes.substr(0, cut);
    SegmentCursor cursor(Cut(head, 7));
    v1::ExecuteResponse got;
    EXPECT_FALSE(ParseWithBytesOutside(&cursor, cursor.remaining(), 1, 3, &got)) << cut;
  }
  const std::string garbage = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  SegmentCursor cursor(Cut(garbage, 4));
  v1::ExecuteResponse got;
  EXPECT_FALSE(ParseWithBytesOutside(&cursor, cursor.remaining(), 1, 3, &got));
}

TEST(ProtoCheckTest, ValidBodiesHaveNoDefect) {
  EXPECT_TRUE(
      ExplainParseFailure(v1::ExecuteResponse::descriptor(), TwoOutputs().SerializeAsString())
          .ok());
  inference::ModelInferRequest m;
  m.set_model_name("Roll");
  (*m.mutable_parameters())["x"].set_int64_param(3);
  m.add_raw_input_contents(std::string(10, '\x80'));
  EXPECT_TRUE(ExplainParseFailure(m.descriptor(), m.SerializeAsString()).ok());
}

TEST(ProtoCheckTest, NamesTheFieldAndByte) {
  v1::ExecuteRequest r;
  r.set_op("Roll");
  r.add_inputs()->set_raw_data("abcdef");
  std::string bytes = r.SerializeAsString();
  bytes.resize(bytes.size() - 2);  // inputs[0].raw_data cut short
  absl::Status s = ExplainParseFailure(v1::ExecuteRequest::descriptor(), bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not a valid tensorops.v1.ExecuteRequest"));
  // The tensor's own length already runs past the end.
  EXPECT_THAT(s.message(), HasSubstr("inputs[0] (field 3) at byte 6"));
  EXPECT_EQ(ErrorFieldPath(s).value_or(""), "inputs[0]");
}

TEST(ProtoCheckTest, GarbageAndBadUtf8) {
  absl::Status s = ExplainParseFailure(v1::ExecuteRequest::descriptor(), "\x0fgarbage");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("at byte 0: wire type 7 is not valid"));
  s = ExplainParseFailure(v1::ExecuteRequest::descriptor(), std::string("\x00", 1));
  EXPECT_THAT(s.message(), HasSubstr("field number 0 is not valid"));
  v1::ExecuteRequest r;
  r.set_op("Roll");
  std::string bytes = r.SerializeAsString();
  bytes[2] = '\xff';  // op's first byte: not UTF-8
  s = ExplainParseFailure(v1::ExecuteRequest::descriptor(), bytes);
  EXPECT_THAT(s.message(), HasSubstr("op (field 1) at byte 0: a string that is not valid UTF-8"));
  EXPECT_FALSE(r.ParseFromString(bytes));  // protobuf agrees: it does not parse
}

}  // namespace
}  // namespace tensorops
