#include "tests/harness/raw_h2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tensorops::testing {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

uint32_t Be32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// An HPACK string literal, not Huffman-coded (7-bit length prefix).
void AppendHpackString(const std::string& s, std::string* out) {
  size_t n = s.size();
  if (n < 127) {
    out->push_back(static_cast<char>(n));
  } else {
    out->push_back(static_cast<char>(127));
    n -= 127;
    while (n >= 128) {
      out->push_back(static_cast<char>((n % 128) | 128));
      n /= 128;
    }
    out->push_back(static_cast<char>(n));
  }
  out->append(s);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RawH2Connection& RawH2Connection::operator=(RawH2Connection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void RawH2Connection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status RawH2Connection::ConnectTcp(int port) {
  Close();
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    Close();
    return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status RawH2Connection::ConnectUnix(const std::string& path) {
  Close();
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return absl::InvalidArgumentError("path too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    Close();
    return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status RawH2Connection::SendAll(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RawH2Connection::SendFrame(uint8_t type, uint8_t flags, uint32_t stream,
                                        const std::string& payload) {
  std::string frame;
  const size_t n = payload.size();
  frame.push_back(static_cast<char>((n >> 16) & 0xff));
  frame.push_back(static_cast<char>((n >> 8) & 0xff));
  frame.push_back(static_cast<char>(n & 0xff));
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) {
    frame.push_back(static_cast<char>((stream >> shift) & 0xff));
  }
  frame += payload;
  return SendAll(frame);
}

absl::Status RawH2Connection::SendPreface() {
  if (absl::Status st = SendAll(std::string(kPreface, sizeof(kPreface) - 1)); !st.ok()) return st;
  return SendFrame(kH2Settings, 0, 0, "");
}

absl::Status RawH2Connection::SendSettingsAck() {
  return SendFrame(kH2Settings, kH2FlagAck, 0, "");
}

absl::Status RawH2Connection::SendPing(uint64_t opaque, bool ack) {
  std::string payload;
  for (int shift = 56; shift >= 0; shift -= 8) {
    payload.push_back(static_cast<char>((opaque >> shift) & 0xff));
  }
  return SendFrame(kH2Ping, ack ? kH2FlagAck : 0, 0, payload);
}

absl::Status RawH2Connection::SendRequestHeaders(uint32_t stream_id, const std::string& path) {
  std::string block;
  block.push_back(static_cast<char>(0x83));  // :method POST (static index 3)
  block.push_back(static_cast<char>(0x86));  // :scheme http (static index 6)
  block.push_back(0x04);                     // :path, literal without indexing (name index 4)
  AppendHpackString(path, &block);
  block.push_back(0x01);  // :authority (name index 1)
  AppendHpackString("127.0.0.1", &block);
  block.push_back(0x0f);  // content-type (name index 31 = 15 + 16)
  block.push_back(0x10);
  AppendHpackString("application/grpc", &block);
  block.push_back(0x00);  // te: trailers (new name)
  AppendHpackString("te", &block);
  AppendHpackString("trailers", &block);
  constexpr uint8_t kEndHeaders = 0x4;
  return SendFrame(kH2Headers, kEndHeaders, stream_id, block);
}

absl::StatusOr<H2Frame> RawH2Connection::ReadFrame(int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  std::string buf;
  size_t want = 9;
  H2Frame frame;
  bool have_header = false;
  while (buf.size() < want) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) return absl::DeadlineExceededError("no frame in time");
    pollfd p{fd_, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return absl::DeadlineExceededError("no frame in time");
    char chunk[16384];
    const ssize_t n = recv(fd_, chunk, std::min(sizeof(chunk), want - buf.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("connection closed by the server");
    buf.append(chunk, static_cast<size_t>(n));
    if (!have_header && buf.size() >= 9) {
      have_header = true;
      const size_t length = (static_cast<size_t>(static_cast<uint8_t>(buf[0])) << 16) |
                            (static_cast<size_t>(static_cast<uint8_t>(buf[1])) << 8) |
                            static_cast<size_t>(static_cast<uint8_t>(buf[2]));
      frame.type = static_cast<uint8_t>(buf[3]);
      frame.flags = static_cast<uint8_t>(buf[4]);
      frame.stream = Be32(buf, 5) & 0x7fffffff;
      want = 9 + length;
    }
  }
  frame.payload = buf.substr(9);
  return frame;
}

absl::StatusOr<H2Frame> RawH2Connection::ReadUntil(uint8_t type, int timeout_ms, bool answer) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) return absl::DeadlineExceededError("frame not seen in time");
    absl::StatusOr<H2Frame> frame = ReadFrame(static_cast<int>(left));
    if (!frame.ok()) return frame.status();
    if (frame->type == type) return frame;
    if (!answer) continue;
    if (frame->type == kH2Settings && (frame->flags & kH2FlagAck) == 0) {
      if (absl::Status st = SendSettingsAck(); !st.ok()) return st;
    } else if (frame->type == kH2Ping && (frame->flags & kH2FlagAck) == 0 &&
               frame->payload.size() == 8) {
      if (absl::Status st = SendFrame(kH2Ping, kH2FlagAck, 0, frame->payload); !st.ok()) return st;
    }
  }
}

bool RawH2Connection::ClosedByPeer(int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    char chunk[16384];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

int64_t H2SettingValue(const H2Frame& settings, uint16_t id) {
  for (size_t at = 0; at + 6 <= settings.payload.size(); at += 6) {
    const uint16_t key = static_cast<uint16_t>((static_cast<uint8_t>(settings.payload[at]) << 8) |
                                               static_cast<uint8_t>(settings.payload[at + 1]));
    if (key == id) return Be32(settings.payload, at + 2);
  }
  return -1;
}

int64_t H2GoawayError(const H2Frame& goaway) {
  if (goaway.payload.size() < 8) return -1;
  return Be32(goaway.payload, 4);
}

std::string H2GoawayDebug(const H2Frame& goaway) {
  return goaway.payload.size() > 8 ? goaway.payload.substr(8) : "";
}

int64_t H2RstError(const H2Frame& rst) {
  if (rst.payload.size() < 4) return -1;
  return Be32(rst.payload, 0);
}

}  // namespace tensorops::testing
