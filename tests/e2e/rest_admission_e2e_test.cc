// The HTTP/REST door's bodies count against the in-flight byte budget
// (--max_inflight_bytes) as they arrive, as gRPC messages do: a declared
// length is reserved before the body is read (over what is free of the
// budget: 503 with Retry-After and a JSON error naming the budget; over the
// whole budget: 413, it can never fit; both before the server takes the
// memory), a chunked body as it grows; the reservation becomes the call's admission
// ticket, and every way out (answer, refusal, the client going away mid-body)
// gives it back: tensorops_inflight_bytes returns to 0 after each case. An
// infer refused at the gate (token, drain) is counted as a ModelInfer is.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/http_get.h"
#include "tests/harness/http_post.h"
#include "tests/harness/server_process.h"
#include "tests/sanitizers.h"

namespace tensorops {
namespace {

using ::tensorops::testing::CheckReversedInfer;
using ::tensorops::testing::HttpPost;
using ::tensorops::testing::HttpPostAnswer;
using ::tensorops::testing::HttpPostOptions;
using ::tensorops::testing::ReverseInfer;
using ::tensorops::testing::ReverseInferBody;
using ::tensorops::testing::ScrapeSample;
using ::tensorops::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kBudget = 32 * kMiB;  // --max_inflight_bytes
constexpr const char* kInfer = "/v2/models/Reverse/infer";

// A socket to the HTTP port that sends what it is told and nothing more.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  bool Send(const std::string& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }

 private:
  int fd_;
  bool connected_ = false;
};

class RestAdmissionE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(
        server_
            ->Start(TENSOROPS_SERVER_PATH, {"--http_port=0", "--metrics_port=0", "--threads=2",
                                            absl::StrCat("--max_inflight_bytes=", kBudget),
                                            absl::StrCat("--max_message_bytes=", 64 * kMiB)})
            .ok());
    port_ = server_->http_port();
    ASSERT_GT(port_, 0);
  }

  double Gauge(const std::string& name) { return ScrapeSample(server_->metrics_port(), name); }
  // Waits (up to 5 s) for the in-flight gauges to reach `bytes` (and no
  // request in flight when bytes is 0), and returns the last bytes seen.
  double WaitInflightBytes(double bytes) {
    double seen = -1;
    for (int i = 0; i < 500; ++i) {
      seen = Gauge("tensorops_inflight_bytes");
      if (seen == bytes && (bytes != 0 || Gauge("tensorops_inflight_requests") == 0)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return seen;
  }
  int64_t HighWaterMiB() { return server_->StatusKiB("VmHWM:") >> 10; }

  std::unique_ptr<ServerProcess> server_;
  int port_ = 0;
};

TEST_F(RestAdmissionE2ETest, DeclaredLengthOverTheBudgetIsRefusedBeforeTheBody) {
  const int64_t hwm = HighWaterMiB();
  // 48 MiB declared (under the 64 MiB body limit, over the 32 MiB budget);
  // only the header is sent: the answer must come without the body.
  const std::string body(48 * kMiB, 'x');
  HttpPostOptions header_only;
  header_only.header_only = true;
  header_only.timeout_ms = 10000;
  const HttpPostAnswer a = HttpPost(port_, kInfer, body, header_only);
  EXPECT_EQ(a.status, 413) << a.error;
  EXPECT_EQ(a.Field("Retry-After"), "");
  EXPECT_EQ(a.Field("Content-Type"), "application/json");
  EXPECT_THAT(a.body, HasSubstr(R"({"error":"request body of 50331648 bytes: )"));
  EXPECT_THAT(a.body, HasSubstr("--max_inflight_bytes=33554432"));
  EXPECT_FALSE(a.body_sent);
  // The memory was never taken.
  // Resident memory means nothing under a sanitizer (ASan's quarantine and
  // shadow keep what was freed); the codes and gauges above still hold.
  if (!testing::kSanitized) EXPECT_LT(HighWaterMiB() - hwm, 16) << "RSS high-water mark rose";
  EXPECT_EQ(WaitInflightBytes(0), 0);
  EXPECT_EQ(ScrapeSample(server_->metrics_port(), "tensorops_rejected_requests_total",
                         {{"limit", "inflight_bytes"}}),
            1);

  // A client that sends the body anyway gets the answer too (the server
  // reads on and drops it before closing), and the server stays up.
  const HttpPostAnswer b = HttpPost(port_, kInfer, body);
  EXPECT_EQ(b.status, 413) << b.error;
  EXPECT_THAT(b.body, HasSubstr("--max_inflight_bytes"));
  EXPECT_EQ(WaitInflightBytes(0), 0);
  const ReverseInfer ok = ReverseInferBody(1 * kMiB);
  HttpPostOptions with_header;
  with_header.headers = ok.headers;
  EXPECT_EQ(CheckReversedInfer(HttpPost(port_, kInfer, ok.body, with_header), 1 * kMiB), "");
}

TEST_F(RestAdmissionE2ETest, ABodyArrivingHoldsItsBytesAndGivesThemBackWhenItsClientLeaves) {
  // A 20 MiB declared body, half sent: reserved whole (not a request yet).
  RawClient slow(port_);
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send(absl::StrCat("POST ", kInfer, " HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                                     20 * kMiB, "\r\n\r\n") +
                        std::string(10 * kMiB, 'y')));
  EXPECT_EQ(WaitInflightBytes(20 * kMiB), 20 * kMiB);
  EXPECT_EQ(Gauge("tensorops_inflight_requests"), 0);

  // Meanwhile 16 MiB more would pass the budget: refused before reading.
  const std::string body16(16 * kMiB, 'z');
  HttpPostOptions header_only;
  header_only.header_only = true;
  const HttpPostAnswer refused = HttpPost(port_, kInfer, body16, header_only);
  EXPECT_EQ(refused.status, 503) << refused.error;
  EXPECT_EQ(refused.Field("Retry-After"), "1");
  EXPECT_THAT(refused.body, HasSubstr("in-flight byte budget exhausted"));
  EXPECT_THAT(refused.body, HasSubstr("--max_inflight_bytes"));

  // The slow client goes away mid-body: its reservation goes back.
  slow.Close();
  EXPECT_EQ(WaitInflightBytes(0), 0);

  // Now an infer of 8 MiB (body + output: 16 MiB) goes through, with
  // Content-Length and chunked; the reservation became its ticket and the
  // ticket goes back with the answer.
  const int64_t n = 8 * kMiB;
  const ReverseInfer infer = ReverseInferBody(n);
  for (int64_t chunk : {int64_t{0}, int64_t{1} << 20, int64_t{777}}) {
    SCOPED_TRACE(absl::StrCat("chunk_bytes ", chunk));
    HttpPostOptions o;
    o.headers = infer.headers;
    o.chunk_bytes = chunk;
    EXPECT_EQ(CheckReversedInfer(HttpPost(port_, kInfer, infer.body, o), n), "");
    EXPECT_EQ(WaitInflightBytes(0), 0);
  }
}

TEST_F(RestAdmissionE2ETest, ChunkedBodyIsCountedAsItGrowsAndRefusedAtTheBudget) {
  const int64_t hwm = HighWaterMiB();
  // 48 MiB chunked: under the body limit, over the whole budget once 32 MiB
  // are in (413: it can never fit).
  const std::string body(48 * kMiB, 'c');
  HttpPostOptions chunked;
  chunked.chunk_bytes = 1 * kMiB;
  const HttpPostAnswer a = HttpPost(port_, kInfer, body, chunked);
  EXPECT_EQ(a.status, 413) << a.error;
  EXPECT_EQ(a.Field("Retry-After"), "");
  EXPECT_EQ(a.Field("Content-Type"), "application/json");
  EXPECT_THAT(a.body, HasSubstr(R"({"error":"chunked request body at )"));
  EXPECT_THAT(a.body, HasSubstr("--max_inflight_bytes=33554432"));
  // It held at most the budget (bounded steps, no doubling copy).
  if (!testing::kSanitized) {
    EXPECT_LE(HighWaterMiB() - hwm, 40) << "RSS high-water mark rose too much";
  }
  EXPECT_EQ(WaitInflightBytes(0), 0);

  // A chunked client that goes away mid-body gives its bytes back.
  RawClient gone(port_);
  ASSERT_TRUE(gone.connected());
  ASSERT_TRUE(gone.Send(absl::StrCat("POST ", kInfer,
                                     " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                                     "400000\r\n", std::string(4 * kMiB, 'g'), "\r\n")));
  double seen = 0;
  for (int i = 0; i < 500 && seen < 4 * kMiB; ++i) {
    seen = Gauge("tensorops_inflight_bytes");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(seen, 4 * kMiB);  // counted as it came, a step ahead
  EXPECT_LE(seen, 5 * kMiB);
  gone.Close();
  EXPECT_EQ(WaitInflightBytes(0), 0);
}

// The bearer token of an infer is checked once, by its Call, so a refusal is
// counted in tensorops_requests_total as a refused ModelInfer is; a control
// endpoint's refusal is answered alike and is not a call.
TEST_F(RestAdmissionE2ETest, ARefusedInferIsCountedAsARefusedModelInferIs) {
  const std::string token_file = ::testing::TempDir() + "/rest_admission_token";
  std::ofstream(token_file) << "s3cret\n";
  server_ = std::make_unique<ServerProcess>();
  ASSERT_TRUE(server_
                  ->Start(TENSOROPS_SERVER_PATH, {"--http_port=0", "--metrics_port=0",
                                                  "--threads=2", "--auth_token_file=" + token_file})
                  .ok());
  port_ = server_->http_port();
  const ReverseInfer b = ReverseInferBody(16);
  HttpPostOptions none;
  none.headers = b.headers;
  HttpPostOptions wrong = none;
  wrong.headers += "Authorization: Bearer wrong\r\n";
  HttpPostOptions right = none;
  right.headers += "Authorization: Bearer s3cret\r\n";
  const std::pair<const HttpPostOptions*, const char*> refused[] = {
      {&none, R"(missing \"authorization: Bearer <token>\")"}, {&wrong, "invalid bearer token"}};
  for (const auto& [options, message] : refused) {
    SCOPED_TRACE(message);
    const HttpPostAnswer a = HttpPost(port_, kInfer, b.body, *options);
    EXPECT_EQ(a.status, 401) << a.error;
    EXPECT_THAT(a.body, HasSubstr(message));
  }
  EXPECT_EQ(HttpPost(port_, "/v2/repository/index", "", none).status, 401);
  EXPECT_EQ(CheckReversedInfer(HttpPost(port_, kInfer, b.body, right), 16), "");
  auto count = [&](const char* code) {
    return ScrapeSample(server_->metrics_port(), "tensorops_requests_total",
                        {{"method", "REST"}, {"op", "Reverse"}, {"code", code}});
  };
  EXPECT_EQ(count("UNAUTHENTICATED"), 2);
  EXPECT_EQ(count("OK"), 1);
  EXPECT_EQ(WaitInflightBytes(0), 0);
  std::remove(token_file.c_str());
}

}  // namespace
}  // namespace tensorops
