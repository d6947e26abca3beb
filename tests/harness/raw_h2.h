// A raw HTTP/2 client connection, for tests that must do what no gRPC client
// does: hold streams open without ever sending data, ignore the server's
// settings, ping too often, or just read the frames a server sends (its
// SETTINGS, keepalive PINGs, GOAWAY).
//
// Frames are written whole with blocking I/O; header blocks use HPACK
// literals without indexing only (no dynamic table, no Huffman), so no
// HPACK state is kept.
//
// Thread-safety: one object per thread.
#ifndef TENSOROPS_TESTS_HARNESS_RAW_H2_H_
#define TENSOROPS_TESTS_HARNESS_RAW_H2_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tensorops::testing {

// HTTP/2 frame types and error codes the tests read (RFC 9113).
inline constexpr uint8_t kH2Data = 0x0;
inline constexpr uint8_t kH2Headers = 0x1;
inline constexpr uint8_t kH2RstStream = 0x3;
inline constexpr uint8_t kH2Settings = 0x4;
inline constexpr uint8_t kH2Ping = 0x6;
inline constexpr uint8_t kH2Goaway = 0x7;
inline constexpr uint8_t kH2WindowUpdate = 0x8;
inline constexpr uint8_t kH2FlagAck = 0x1;
inline constexpr uint32_t kH2RefusedStream = 0x7;
inline constexpr uint32_t kH2EnhanceYourCalm = 0xb;
inline constexpr uint16_t kH2SettingsMaxConcurrentStreams = 0x3;

struct H2Frame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
};

class RawH2Connection {
 public:
  RawH2Connection() = default;
  ~RawH2Connection() { Close(); }
  RawH2Connection(RawH2Connection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  RawH2Connection& operator=(RawH2Connection&& other) noexcept;
  RawH2Connection(const RawH2Connection&) = delete;
  RawH2Connection& operator=(const RawH2Connection&) = delete;

  // A TCP connection to 127.0.0.1:port, or to a Unix socket path. Nothing is
  // sent yet.
  absl::Status ConnectTcp(int port);
  absl::Status ConnectUnix(const std::string& path);

  // The client connection preface and an empty SETTINGS frame.
  absl::Status SendPreface();
  absl::Status SendSettingsAck();
  absl::Status SendPing(uint64_t opaque, bool ack = false);
  // A gRPC request's HEADERS (POST `path`, content-type application/grpc,
  // te: trailers) on `stream_id` (odd, increasing), without END_STREAM: the
  // stream stays open waiting for a request message that never comes.
  absl::Status SendRequestHeaders(uint32_t stream_id, const std::string& path);

  // The next frame, waiting up to `timeout_ms`. DeadlineExceeded on timeout,
  // Unavailable when the server closed the connection.
  absl::StatusOr<H2Frame> ReadFrame(int timeout_ms);
  // Reads frames until one of `type` arrives (answering SETTINGS with an ACK
  // and PINGs with their ACK on the way, as a live client would, when
  // `answer` is true). Errors as ReadFrame's.
  absl::StatusOr<H2Frame> ReadUntil(uint8_t type, int timeout_ms, bool answer = true);
  // True when the server has closed the connection (EOF or reset), waiting up
  // to `timeout_ms`; frames read meanwhile are discarded.
  bool ClosedByPeer(int timeout_ms);

  int fd() const { return fd_; }
  void Close();

 private:
  absl::Status SendFrame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload);
  absl::Status SendAll(const std::string& bytes);

  int fd_ = -1;
};

// A SETTINGS frame's value for `id`, or -1 when absent.
int64_t H2SettingValue(const H2Frame& settings, uint16_t id);
// A GOAWAY frame's error code (-1 if malformed) and debug text.
int64_t H2GoawayError(const H2Frame& goaway);
std::string H2GoawayDebug(const H2Frame& goaway);
// An RST_STREAM frame's error code (-1 if malformed).
int64_t H2RstError(const H2Frame& rst);

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_RAW_H2_H_
