#include "server/core/logging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensorops {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

// The call this thread works for (LogCallScope); empty: none.
thread_local LogCallScope::Ids t_ids;

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  if (text == "error") return LogLevel::kError;
  if (text == "warning") return LogLevel::kWarning;
  if (text == "info") return LogLevel::kInfo;
  return absl::InvalidArgumentError(
      absl::StrCat("log level \"", text.substr(0, 32), "\" must be error, warning or info"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  static constexpr char kLetters[] = {'E', 'W', 'I'};
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), " ",
      std::string(1, kLetters[static_cast<int>(level)]), " tensorops-server: ", message);
  if (t_ids.trace_size > 0) {
    absl::StrAppend(&line, " trace_id=", absl::string_view(t_ids.trace_id, t_ids.trace_size),
                    " span_id=", absl::string_view(t_ids.span_id, t_ids.span_size));
  }
  line.push_back('\n');
  // One write per line so lines from different threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

LogCallScope::LogCallScope(absl::string_view trace_id, absl::string_view span_id)
    : previous_(t_ids) {
  t_ids.trace_size = static_cast<uint8_t>(std::min(trace_id.size(), sizeof(t_ids.trace_id)));
  t_ids.span_size = static_cast<uint8_t>(std::min(span_id.size(), sizeof(t_ids.span_id)));
  std::memcpy(t_ids.trace_id, trace_id.data(), t_ids.trace_size);
  std::memcpy(t_ids.span_id, span_id.data(), t_ids.span_size);
}

LogCallScope::~LogCallScope() { t_ids = previous_; }

const char* StatusCodeName(absl::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? kNames[c] : "UNKNOWN";
}

void LogRequestError(absl::StatusCode code, const std::string& op, const std::string& message) {
  static std::atomic<int64_t> last_logged_ns[17];
  static std::atomic<int64_t> suppressed[17];
  const int c = static_cast<int>(code);
  if (c < 0 || c > 16) return;
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_logged_ns[c].load();
  if (last != 0 && now - last < int64_t{10'000'000'000}) {
    suppressed[c].fetch_add(1);
    return;
  }
  if (!last_logged_ns[c].compare_exchange_strong(last, now)) {
    suppressed[c].fetch_add(1);
    return;
  }
  const int64_t n = suppressed[c].exchange(0);
  Log(LogLevel::kWarning,
      absl::StrCat(
          "request failed: ", StatusCodeName(code), " op=", op, ": ", message,
          n > 0 ? absl::StrCat(" (", n, " more ", StatusCodeName(code), " since the last line)")
                : ""));
}

}  // namespace tensorops
