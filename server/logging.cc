#include "server/logging.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensorops {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

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
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
                   " ", std::string(1, kLetters[static_cast<int>(level)]),
                   " tensorops-server: ", message, "\n");
  // One write per line so lines from different threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace tensorops
