// Log: the one way the services write a line to stderr — a time, a level, the program, a message
// and named fields — as text for a person (the default) or as JSON lines for a log pipeline
// (--log-format json). A line about a request carries its request_id (and trace_id when there is
// one) as fields, so one request's lines can be found across the three services. Each line is one
// write(2), so lines from different threads never interleave.
//
//   LogWarning("discovery lookup failed").With("what", what).With("error", status.message());
//
// The line is written when the LogLine expression ends. Anything a client can trigger goes
// through a LogRateLimit, so a flood of bad requests cannot flood the log.
#ifndef YOCO_LIB_LOG_LOG_H_
#define YOCO_LIB_LOG_LOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace yoco {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

struct LogSettings {
  std::string program = "yoco";  // every line names it
  LogFormat format = LogFormat::kText;
  LogLevel min_level = LogLevel::kInfo;
  // Where finished lines go (each ends in '\n'); null: stderr. Tests capture lines here.
  std::function<void(absl::string_view line)> sink;
};

// Sets how lines are written from now on. Called at start-up (and by tests); thread-safe.
void ConfigureLog(LogSettings settings);
bool LogEnabled(LogLevel level);

class LogLine {
 public:
  LogLine(LogLevel level, absl::string_view message);
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine();  // writes the line

  LogLine& With(absl::string_view key, absl::string_view value);
  LogLine& With(absl::string_view key, const char* value) {
    return With(key, absl::string_view(value));
  }
  LogLine& With(absl::string_view key, const std::string& value) {
    return With(key, absl::string_view(value));
  }
  LogLine& With(absl::string_view key, int64_t value);
  LogLine& With(absl::string_view key, uint64_t value);
  LogLine& With(absl::string_view key, int value) { return With(key, int64_t{value}); }
  LogLine& With(absl::string_view key, uint32_t value) { return With(key, uint64_t{value}); }
  LogLine& With(absl::string_view key, double value);
  LogLine& With(absl::string_view key, bool value);
  // Lines held back by a LogRateLimit before this one (nothing when 0).
  LogLine& HeldBack(uint64_t count);

 private:
  struct Field {
    std::string key;
    std::string value;
    bool quoted;  // a string (quoted in JSON, and in text when it has spaces or quotes)
  };

  const bool enabled_;
  const LogLevel level_;
  const std::string message_;
  std::vector<Field> fields_;
};

inline LogLine LogDebug(absl::string_view message) { return LogLine(LogLevel::kDebug, message); }
inline LogLine LogInfo(absl::string_view message) { return LogLine(LogLevel::kInfo, message); }
inline LogLine LogWarning(absl::string_view message) {
  return LogLine(LogLevel::kWarning, message);
}
inline LogLine LogError(absl::string_view message) { return LogLine(LogLevel::kError, message); }

// At most `burst` lines per `period`; lines beyond are counted, and the next line allowed says
// how many were held back (LogLine::HeldBack).
class LogRateLimit {
 public:
  LogRateLimit(int burst, absl::Duration period) : burst_(burst), period_(period) {}
  // Whether to write a line now; when true, `held_back` is the count dropped since the last one.
  bool Allow(uint64_t* held_back, absl::Time now = absl::Now());

 private:
  const int burst_;
  const absl::Duration period_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t held_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_LOG_LOG_H_
