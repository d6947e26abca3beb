// A test client for the HTTP/REST door's request bodies: one POST over a
// POSIX socket to 127.0.0.1, with a Content-Length or chunked body, that
// watches for an early answer while it sends (as curl does): a server that
// refuses a body before reading it (413, 503) answers while the client is
// still sending, and the client then stops sending and reads the answer.
//
// Thread-safety: free of shared state; safe to call from any thread.
#ifndef TENSOROPS_TESTS_HARNESS_HTTP_POST_H_
#define TENSOROPS_TESTS_HARNESS_HTTP_POST_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tensorops::testing {

struct HttpPostOptions {
  // 0: send Content-Length; > 0: Transfer-Encoding: chunked in chunks this big.
  int64_t chunk_bytes = 0;
  // Extra header lines, each ending in "\r\n".
  std::string headers;
  // Only the header (the declared length is body.size()), then wait for the
  // answer without sending the body.
  bool header_only = false;
  int timeout_ms = 60000;  // connect + send + receive together
};

struct HttpPostAnswer {
  int status = 0;          // 0: no answer (see error)
  std::string header;      // the status line and fields, up to the empty line
  std::string body;        // Content-Length bytes (or up to the close)
  bool body_sent = false;  // the whole body left before the answer came
  std::string error;       // why there is no answer (connect, reset, timeout)

  // A field's value (case-insensitive name), or "" when absent.
  std::string Field(absl::string_view name) const;
};

HttpPostAnswer HttpPost(int port, const std::string& path, absl::string_view body,
                        const HttpPostOptions& options = {});

// A binary infer of Reverse (axis 0) over `n` UINT8 values whose output is
// asked for binary: `body` for HttpPost and its Inference-Header-Content-Length
// line for HttpPostOptions' extra headers. The values are ReverseInputByte(i).
struct ReverseInfer {
  std::string body;
  std::string headers;
};
ReverseInfer ReverseInferBody(int64_t n);
uint8_t ReverseInputByte(int64_t i);
// Empty when `a` is a 200 whose binary output is ReverseInferBody(n)'s input
// reversed; else what is wrong.
std::string CheckReversedInfer(const HttpPostAnswer& a, int64_t n);

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_HTTP_POST_H_
