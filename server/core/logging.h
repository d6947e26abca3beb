// Minimal leveled logging to stderr (Debian's Abseil 20220623 has no absl/log).
// One line per event: "2026-11-22T03:11:43.123Z I tensorops-server: message".
// A line written while a call works on the thread (LogCallScope) ends with
// that call's " trace_id=<32 hex> span_id=<16 hex>" (server/core/trace.h),
// so every line of a call, its access line too, finds its trace.
//
// Thread-safety: safe from any thread; each line is written with one write().
#ifndef TENSOROPS_SERVER_CORE_LOGGING_H_
#define TENSOROPS_SERVER_CORE_LOGGING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorops {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2 };

// "error" | "warning" | "info".
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, absl::string_view message);

// While it lives, Log lines of this thread carry these ids (copied: the
// call may end, and go, while the scope lives). Scopes nest: the inner one
// wins, the outer one is back when it ends. One per stack frame.
class LogCallScope {
 public:
  // Up to 32 and 16 characters (longer ones are cut).
  LogCallScope(absl::string_view trace_id, absl::string_view span_id);
  ~LogCallScope();
  LogCallScope(const LogCallScope&) = delete;
  LogCallScope& operator=(const LogCallScope&) = delete;

  // The ids a thread's lines carry now: trace id (32), span id (16); both
  // empty outside any scope.
  struct Ids {
    char trace_id[32];
    char span_id[16];
    uint8_t trace_size = 0;
    uint8_t span_size = 0;
  };

 private:
  Ids previous_;
};

// "OK", "INVALID_ARGUMENT", ... as gRPC names the code ("UNKNOWN" for values
// outside the canonical 0..16).
const char* StatusCodeName(absl::StatusCode code);
// A failed RPC, rate-limited per status code: the first failure with each
// code is logged, then at most one line per code every 10 s, with the number
// of failures since.
void LogRequestError(absl::StatusCode code, const std::string& op, const std::string& message);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_LOGGING_H_
