// The HTTP transport (server/http/http_transport.h) on its own, under a
// protocol of the test's: it hands each request, read whole, to the route
// function; an answer may come later from another thread through the
// executor; what it refuses itself it lets the protocol word. No OIP, no
// JSON: the routes here echo what they got. Raw HTTP/1.1 over 127.0.0.1.
#include "server/http/http_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/core/admission.h"
#include "server/core/call.h"
#include "server/core/metrics.h"

namespace tensorops {
namespace {

// Sends `request` to 127.0.0.1:`port` and reads until the server closes
// (each request here says Connection: close) or 10 s pass.
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "connect failed";
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

const char* MethodName(HttpMethod m) {
  switch (m) {
    case HttpMethod::kGet:
      return "GET";
    case HttpMethod::kHead:
      return "HEAD";
    case HttpMethod::kPost:
      return "POST";
    case HttpMethod::kOther:
      return "OTHER";
  }
  return "?";
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = std::make_unique<Metrics>(std::vector<std::string>{"Roll"});
    admission_ = std::make_unique<AdmissionController>(16, int64_t{1} << 20, nullptr);
    pool_ = std::make_unique<ThreadPool>(1);
    pipeline_ = std::make_unique<CallPipeline>(&registry_, pool_.get(), admission_.get(),
                                               metrics_.get(), CallPipeline::Options());
  }

  // Starts the transport with `route`, on a free port, 64 KiB bodies at most.
  void Start(HttpHandler route) {
    HttpProtocol protocol;
    protocol.route = std::move(route);
    protocol.error = [](int status, absl::string_view why) {
      HttpResponse r;
      r.status = status;
      r.headers.emplace_back("Content-Type", "text/plain");
      r.body.text = absl::StrCat("refused ", status, ": ", why);
      return r;
    };
    protocol.status_of = [](const absl::Status&) { return 503; };
    HttpTransport::Options options;
    options.port = 0;
    options.loops = 1;
    options.max_body_bytes = 64 << 10;
    absl::StatusOr<std::unique_ptr<HttpTransport>> t =
        HttpTransport::Start(pipeline_.get(), std::move(protocol), options);
    ASSERT_TRUE(t.ok()) << t.status();
    transport_ = *std::move(t);
  }

  static HttpResponse Text(int status, std::string text) {
    HttpResponse r;
    r.status = status;
    r.headers.emplace_back("Content-Type", "text/plain");
    r.body.text = std::move(text);
    return r;
  }

  OpRegistry registry_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<AdmissionController> admission_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CallPipeline> pipeline_;
  std::unique_ptr<HttpTransport> transport_;
};

TEST_F(HttpTransportTest, HandsEachRequestWholeToTheRoute) {
  Start([](HttpRequest request, HttpExecutor, Reply reply) {
    reply(
        Text(200, absl::StrCat(MethodName(request.method), " ", request.target, " ",
                               request.Header("x-test").value_or("-"), " ", request.body.view())));
  });
  const struct {
    const char* request;
    const char* echo;
  } kRows[] = {
      {"GET /a/b?c=d HTTP/1.1\r\nHost: x\r\nX-Test: v\r\nConnection: close\r\n\r\n",
       "GET /a/b?c=d v "},
      {"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
       "POST /p - hello"},
      // Chunked: the body arrives whole all the same.
      {"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
       "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
       "POST /c - abcde"},
      {"DELETE /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "OTHER /d - "},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.request);
    const std::string answer = Exchange(transport_->port(), row.request);
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
    EXPECT_TRUE(absl::EndsWith(answer, absl::StrCat("\r\n\r\n", row.echo))) << answer;
  }
}

TEST_F(HttpTransportTest, AnAnswerFromAnotherThreadComesBackThroughTheLoop) {
  Start([](HttpRequest request, HttpExecutor loop, Reply reply) {
    std::thread([loop, reply, target = request.target] {
      loop([reply, target] { reply(Text(201, "later " + target)); });
    }).detach();
  });
  const std::string answer =
      Exchange(transport_->port(), "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 201")) << answer;
  EXPECT_TRUE(absl::EndsWith(answer, "later /x")) << answer;
}

TEST_F(HttpTransportTest, ItsOwnRefusalsAreWordedByTheProtocol) {
  std::atomic<int> routed{0};
  Start([&routed](HttpRequest, HttpExecutor, Reply reply) {
    ++routed;
    reply(Text(200, "routed"));
  });
  // A body over the limit (64 KiB): 413, never routed.
  const std::string big =
      "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\nConnection: close\r\n\r\n";
  std::string answer = Exchange(transport_->port(), big);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 413")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "refused 413: ")) << answer;
  // Not HTTP at all: 400.
  answer = Exchange(transport_->port(), "this is not http\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "refused 400: ")) << answer;
  EXPECT_EQ(routed, 0);
}

}  // namespace
}  // namespace tensorops
