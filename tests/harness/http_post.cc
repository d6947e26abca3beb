#include "tests/harness/http_post.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tensorops::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

// The bytes to send, in order: the head, then the body (framed as chunks
// when chunk_bytes > 0), produced piece by piece so a 200 MiB body is never
// copied.
class Outgoing {
 public:
  Outgoing(std::string head, absl::string_view body, int64_t chunk_bytes)
      : head_(std::move(head)), body_(body), chunk_bytes_(chunk_bytes) {}
  // The next piece not yet sent; empty when everything is.
  absl::string_view Next() {
    while (true) {
      if (!current_.empty()) return current_;
      switch (stage_) {
        case 0:
          current_ = head_;
          stage_ = 1;
          break;
        case 1:
          if (chunk_bytes_ <= 0) {
            current_ = body_;
            stage_ = 4;
            break;
          }
          if (at_ >= body_.size()) {
            current_ = "0\r\n\r\n";
            stage_ = 4;
            break;
          }
          chunk_ = body_.substr(at_, static_cast<size_t>(chunk_bytes_));
          at_ += chunk_.size();
          frame_ = absl::StrCat(absl::Hex(chunk_.size()), "\r\n");
          current_ = frame_;
          stage_ = 2;
          break;
        case 2:
          current_ = chunk_;
          stage_ = 3;
          break;
        case 3:
          current_ = "\r\n";
          stage_ = 1;
          break;
        default:
          return "";
      }
    }
  }
  void Sent(size_t n) { current_.remove_prefix(n); }

 private:
  const std::string head_;
  const absl::string_view body_;
  const int64_t chunk_bytes_;
  int stage_ = 0;  // 0 head, 1 next chunk, 2 chunk data, 3 chunk end, 4 done
  size_t at_ = 0;
  std::string frame_;
  absl::string_view chunk_;
  absl::string_view current_;
};

}  // namespace

std::string HttpPostAnswer::Field(absl::string_view name) const {
  for (absl::string_view line : absl::StrSplit(header, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(line.substr(0, colon), name)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

HttpPostAnswer HttpPost(int port, const std::string& path, absl::string_view body,
                        const HttpPostOptions& options) {
  HttpPostAnswer answer;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options.timeout_ms);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    answer.error = "socket failed";
    return answer;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    answer.error = absl::StrCat("connect: ", std::strerror(errno));
    close(fd);
    return answer;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string head =
      absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", options.headers);
  if (options.chunk_bytes > 0) {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n\r\n");
  } else {
    absl::StrAppend(&head, "Content-Length: ", body.size(), "\r\n\r\n");
  }
  Outgoing out(std::move(head), options.header_only ? absl::string_view() : body,
               options.header_only ? 0 : options.chunk_bytes);
  std::string in;
  bool sending = true;
  size_t header_end = std::string::npos;
  int64_t content_length = -1;
  while (true) {
    absl::string_view next = sending ? out.Next() : absl::string_view();
    if (sending && next.empty()) {
      sending = false;
      answer.body_sent = !options.header_only;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0};
    const int left = MillisLeft(deadline);
    if (left == 0 || poll(&p, 1, left) <= 0) {
      answer.error = "timed out";
      break;
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      // The server answers (or closes): stop sending (an early answer
      // refuses the body); recv says which.
      sending = false;
      char buf[65536];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        if (n < 0) answer.error = absl::StrCat("recv: ", std::strerror(errno));
        break;  // closed: the body is what came
      }
      in.append(buf, static_cast<size_t>(n));
      if (header_end == std::string::npos) {
        header_end = in.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          answer.header = in.substr(0, header_end);
          const std::string status = answer.header.substr(9, 3);
          if (!absl::SimpleAtoi(status, &answer.status)) answer.status = -1;
          int64_t l = 0;
          if (absl::SimpleAtoi(answer.Field("Content-Length"), &l)) content_length = l;
          in.erase(0, header_end + 4);
        }
      }
      if (header_end != std::string::npos && content_length >= 0 &&
          static_cast<int64_t>(in.size()) >= content_length) {
        break;
      }
      continue;
    }
    if (sending && (p.revents & POLLOUT)) {
      const ssize_t n = send(fd, next.data(), next.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        answer.error = absl::StrCat("send: ", std::strerror(errno));
        sending = false;
        continue;
      }
      out.Sent(static_cast<size_t>(n));
    }
  }
  close(fd);
  if (header_end == std::string::npos) {
    answer.status = 0;
    if (answer.error.empty()) answer.error = "no answer";
  } else {
    answer.body = std::move(in);
    if (content_length >= 0 && static_cast<int64_t>(answer.body.size()) < content_length) {
      answer.error = "answer cut short";
    } else {
      answer.error.clear();
    }
  }
  return answer;
}

uint8_t ReverseInputByte(int64_t i) { return static_cast<uint8_t>((i * 0x9E3779B1ull) >> 23); }

ReverseInfer ReverseInferBody(int64_t n) {
  const std::string json =
      absl::StrCat(R"({"inputs":[{"name":"data","shape":[)", n,
                   R"(],"datatype":"UINT8","parameters":{"binary_data_size":)", n,
                   R"(}},{"name":"axis","shape":[1],"datatype":"INT64","data":[0]}],)",
                   R"("parameters":{"mode":"index","binary_data_output":true}})");
  ReverseInfer b;
  b.body.reserve(json.size() + static_cast<size_t>(n));
  b.body = json;
  for (int64_t i = 0; i < n; ++i) b.body.push_back(static_cast<char>(ReverseInputByte(i)));
  b.headers = absl::StrCat("Inference-Header-Content-Length: ", json.size(), "\r\n");
  return b;
}

std::string CheckReversedInfer(const HttpPostAnswer& a, int64_t n) {
  if (a.status != 200) return absl::StrCat("status ", a.status, " ", a.error, " ", a.body);
  int64_t json = 0;
  if (!absl::SimpleAtoi(a.Field("Inference-Header-Content-Length"), &json)) return "no json length";
  if (static_cast<int64_t>(a.body.size()) != json + n) return "wrong size";
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(a.body[json + i]) != ReverseInputByte(n - 1 - i)) {
      return absl::StrCat("wrong byte at ", i);
    }
  }
  return "";
}

}  // namespace tensorops::testing
