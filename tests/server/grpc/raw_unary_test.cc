// ParseRequest (server/grpc/raw_unary.h): what a raw Execute handler makes
// of the request gRPC hands it.
#include "server/grpc/raw_unary.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "tensorops/v1/tensorops.pb.h"

namespace tensorops {
namespace {

grpc::ByteBuffer BufferOf(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(RawUnaryTest, ParsesAMessageAndFreesTheBuffer) {
  v1::ExecuteRequest request;
  request.set_op("Roll");
  grpc::ByteBuffer buffer = BufferOf(request.SerializeAsString());
  v1::ExecuteRequest parsed;
  ASSERT_TRUE(ParseRequest(&buffer, &parsed).ok());
  EXPECT_EQ(parsed.op(), "Roll");
  EXPECT_EQ(buffer.Length(), 0u);
}

TEST(RawUnaryTest, AnEmptyMessageIsAMessage) {
  grpc::ByteBuffer buffer = BufferOf("");
  ASSERT_TRUE(buffer.Valid());
  v1::ExecuteRequest parsed;
  EXPECT_TRUE(ParseRequest(&buffer, &parsed).ok());
  EXPECT_EQ(parsed.op(), "");
}

// gRPC runs a raw handler with no buffer when the stream ended before its
// message arrived: that call was cancelled, not sent an empty request.
TEST(RawUnaryTest, NoMessageAtAllIsCancelled) {
  grpc::ByteBuffer none;
  ASSERT_FALSE(none.Valid());
  v1::ExecuteRequest parsed;
  const absl::Status s = ParseRequest(&none, &parsed);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "never arrived")) << s;
}

TEST(RawUnaryTest, GarbageIsAnInvalidArgument) {
  grpc::ByteBuffer buffer = BufferOf(std::string("\xff\xff\xff\xff", 4));
  v1::ExecuteRequest parsed;
  EXPECT_EQ(ParseRequest(&buffer, &parsed).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tensorops
