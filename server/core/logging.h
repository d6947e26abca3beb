// Minimal leveled logging to stderr (Debian's Abseil 20220623 has no absl/log).
// One line per event: "2026-11-22T03:11:43.123Z I tensorops-server: message".
//
// Thread-safety: safe from any thread; each line is written with one write().
#ifndef TENSOROPS_SERVER_CORE_LOGGING_H_
#define TENSOROPS_SERVER_CORE_LOGGING_H_

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

// "OK", "INVALID_ARGUMENT", ... as gRPC names the code ("UNKNOWN" for values
// outside the canonical 0..16).
const char* StatusCodeName(absl::StatusCode code);
// A failed RPC, rate-limited per status code: the first failure with each
// code is logged, then at most one line per code every 10 s, with the number
// of failures since.
void LogRequestError(absl::StatusCode code, const std::string& op, const std::string& message);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_LOGGING_H_
