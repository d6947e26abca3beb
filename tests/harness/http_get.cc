#include "tests/harness/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tensorops::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Closes the descriptor on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(absl::string_view what, int port) {
  return absl::UnavailableError(
      absl::StrCat(what, " 127.0.0.1:", port, ": ", std::strerror(errno)));
}

// Milliseconds left until `deadline`, at least 0.
int RemainingMs(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits until `fd` is ready for `events`, or the deadline passes.
absl::Status WaitFor(int fd, short events, Clock::time_point deadline, int port,
                     absl::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return absl::OkStatus();
    if (n == 0) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", what, " 127.0.0.1:", port));
    }
    if (errno != EINTR) return Errno(what, port);
  }
}

// Parses `k="v",k2="v2"` (the inside of the braces) with the format's escapes
// (\\, \", \n). Returns false on malformed input.
bool ParseLabels(absl::string_view s, std::map<std::string, std::string>* out) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t eq = s.find('=', i);
    if (eq == absl::string_view::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    std::string key(absl::StripAsciiWhitespace(s.substr(i, eq - i)));
    std::string value;
    size_t j = eq + 2;
    for (; j < s.size() && s[j] != '"'; ++j) {
      if (s[j] == '\\' && j + 1 < s.size()) {
        ++j;
        value.push_back(s[j] == 'n' ? '\n' : s[j]);
      } else {
        value.push_back(s[j]);
      }
    }
    if (j >= s.size()) return false;  // no closing quote
    (*out)[std::move(key)] = std::move(value);
    i = j + 1;
    while (i < s.size() && (s[i] == ',' || s[i] == ' ')) ++i;
  }
  return true;
}

// strtod, but the whole string must be a number ("+Inf" and "NaN" included).
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool LabelValuesMatch(const std::string& key, const std::string& want, const std::string& got) {
  if (want == got) return true;
  double a = 0, b = 0;
  return key == "le" && ParseDouble(want, &a) && ParseDouble(got, &b) && a == b;
}

bool LabelsMatch(const std::map<std::string, std::string>& want,
                 const std::map<std::string, std::string>& got) {
  if (want.size() != got.size()) return false;
  for (const auto& [key, value] : want) {
    auto it = got.find(key);
    if (it == got.end() || !LabelValuesMatch(key, value, it->second)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> HttpGet(int port, const std::string& path, int timeout_ms) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Errno("socket for", port);

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return Errno("connect to", port);
    absl::Status waited = WaitFor(fd.get(), POLLOUT, deadline, port, "connecting to");
    if (!waited.ok()) return waited;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      return Errno("connect to", port);
    }
  }

  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    absl::Status waited = WaitFor(fd.get(), POLLOUT, deadline, port, "sending to");
    if (!waited.ok()) return waited;
    const ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Errno("send to", port);
    }
    sent += static_cast<size_t>(n);
  }

  // HTTP/1.0 without keep-alive: the server closes after the response.
  std::string response;
  char buf[16384];
  for (;;) {
    absl::Status waited = WaitFor(fd.get(), POLLIN, deadline, port, "reading from");
    if (!waited.ok()) return waited;
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Errno("recv from", port);
    }
    response.append(buf, static_cast<size_t>(n));
  }

  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("GET ", path, " on port ", port,
                                            ": no complete HTTP header in ", response.size(),
                                            " bytes"));
  }
  const absl::string_view head(response.data(), header_end);
  std::string body = response.substr(header_end + 4);
  const std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  const std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      status_line[1] != "200") {
    return absl::FailedPreconditionError(
        absl::StrCat("GET ", path, " on port ", port, " answered \"", lines[0], "\""));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(lines[i], absl::MaxSplits(':', 1));
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (absl::EqualsIgnoreCase(kv.first, "Transfer-Encoding") &&
        absl::EqualsIgnoreCase(value, "chunked")) {
      return absl::UnimplementedError(
          absl::StrCat("GET ", path, " on port ", port, ": chunked body not supported"));
    }
    size_t length = 0;
    if (absl::EqualsIgnoreCase(kv.first, "Content-Length") && absl::SimpleAtoi(value, &length) &&
        length != body.size()) {
      return absl::DataLossError(absl::StrCat("GET ", path, " on port ", port, ": Content-Length ",
                                              length, " but got ", body.size(), " bytes"));
    }
  }
  return body;
}

double ScrapeSample(int metrics_port, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
  absl::StatusOr<std::string> body = HttpGet(metrics_port, "/metrics");
  if (!body.ok()) return -1;
  absl::StatusOr<double> v = FindSample(*body, name, labels);
  return v.ok() ? *v : -1;
}

absl::StatusOr<double> FindSample(const std::string& body, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  int matches = 0;
  double found = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    // The metric name ends at '{' or at the first space.
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == absl::string_view::npos || line.substr(0, name_end) != name) continue;
    std::map<std::string, std::string> got;
    size_t rest = name_end;
    if (line[name_end] == '{') {
      // Label values may contain '}' inside quotes; find the closing brace
      // outside them.
      bool quoted = false;
      size_t close = absl::string_view::npos;
      for (size_t i = name_end + 1; i < line.size(); ++i) {
        if (quoted && line[i] == '\\') {
          ++i;
        } else if (line[i] == '"') {
          quoted = !quoted;
        } else if (!quoted && line[i] == '}') {
          close = i;
          break;
        }
      }
      if (close == absl::string_view::npos ||
          !ParseLabels(line.substr(name_end + 1, close - name_end - 1), &got)) {
        return absl::DataLossError(absl::StrCat("malformed sample line: ", line));
      }
      rest = close + 1;
    }
    if (!LabelsMatch(labels, got)) continue;
    // Value, then an optional timestamp.
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line.substr(rest), ' ', absl::SkipEmpty());
    double value = 0;
    if (fields.empty() || !ParseDouble(std::string(fields[0]), &value)) {
      return absl::DataLossError(absl::StrCat("malformed sample value: ", line));
    }
    found = value;
    ++matches;
  }
  if (matches == 0) {
    std::string want;
    for (const auto& [key, value] : labels) {
      absl::StrAppend(&want, want.empty() ? "" : ",", key, "=\"", value, "\"");
    }
    return absl::NotFoundError(absl::StrCat("no sample ", name, "{", want, "}"));
  }
  if (matches > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(matches, " samples match ", name, "; the label set is ambiguous"));
  }
  return found;
}

}  // namespace tensorops::testing
