// Formatting and writing log lines. The settings are read under a lock per line: lines are rare
// next to the work they describe, and ConfigureLog may run while threads log (tests do).
#include "lib/log/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

absl::Mutex settings_mu(absl::kConstInit);
LogSettings& Settings() ABSL_EXCLUSIVE_LOCKS_REQUIRED(settings_mu) {
  static LogSettings* settings = new LogSettings();
  return *settings;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

// JSON string contents: quotes, backslashes and control characters escaped; bytes >= 0x80 pass
// (the values are UTF-8, or bytes a client sent, which a JSON reader then reports, not us).
void AppendJsonEscaped(std::string& out, absl::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
}

// Text values: bare when they are one plain word, else quoted with JSON's escapes, so a line is
// always one line and a value with spaces cannot pose as another field.
void AppendTextValue(std::string& out, absl::string_view s) {
  bool bare = !s.empty();
  for (const char c : s) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      bare = false;
      break;
    }
  }
  if (bare) {
    out.append(s.data(), s.size());
    return;
  }
  out += '"';
  AppendJsonEscaped(out, s);
  out += '"';
}

void WriteAll(absl::string_view line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report a failing stderr
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (name == LevelName(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("log level \"", name, "\": expected debug, info, warning or error"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("log format \"", name, "\": expected text or json"));
}

void ConfigureLog(LogSettings settings) {
  absl::MutexLock lock(&settings_mu);
  Settings() = std::move(settings);
}

bool LogEnabled(LogLevel level) {
  absl::MutexLock lock(&settings_mu);
  return level >= Settings().min_level;
}

LogLine::LogLine(LogLevel level, absl::string_view message)
    : enabled_(LogEnabled(level)), level_(level), message_(enabled_ ? message : "") {}

LogLine& LogLine::With(absl::string_view key, absl::string_view value) {
  if (enabled_) fields_.push_back({std::string(key), std::string(value), true});
  return *this;
}

LogLine& LogLine::With(absl::string_view key, int64_t value) {
  if (enabled_) fields_.push_back({std::string(key), absl::StrCat(value), false});
  return *this;
}

LogLine& LogLine::With(absl::string_view key, uint64_t value) {
  if (enabled_) fields_.push_back({std::string(key), absl::StrCat(value), false});
  return *this;
}

LogLine& LogLine::With(absl::string_view key, double value) {
  if (!enabled_) return *this;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  fields_.push_back({std::string(key), buf, false});
  return *this;
}

LogLine& LogLine::With(absl::string_view key, bool value) {
  if (enabled_) fields_.push_back({std::string(key), value ? "true" : "false", false});
  return *this;
}

LogLine& LogLine::HeldBack(uint64_t count) { return count == 0 ? *this : With("held_back", count); }

LogLine::~LogLine() {
  if (!enabled_) return;
  std::function<void(absl::string_view)> sink;
  std::string program;
  LogFormat format;
  {
    absl::MutexLock lock(&settings_mu);
    sink = Settings().sink;
    program = Settings().program;
    format = Settings().format;
  }
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
  std::string line;
  if (format == LogFormat::kJson) {
    absl::StrAppend(&line, "{\"time\":\"", time, "\",\"level\":\"", LevelName(level_),
                    "\",\"program\":\"");
    AppendJsonEscaped(line, program);
    line += "\",\"message\":\"";
    AppendJsonEscaped(line, message_);
    line += '"';
    for (const Field& f : fields_) {
      line += ",\"";
      AppendJsonEscaped(line, f.key);
      line += "\":";
      if (f.quoted) line += '"';
      AppendJsonEscaped(line, f.value);
      if (f.quoted) line += '"';
    }
    line += "}\n";
  } else {
    const char level = absl::ascii_toupper(LevelName(level_)[0]);
    absl::StrAppend(&line, time, " ", std::string(1, level), " ", program, ": ");
    for (const char c : message_) line += c == '\n' ? ' ' : c;
    for (const Field& f : fields_) {
      absl::StrAppend(&line, " ", f.key, "=");
      AppendTextValue(line, f.value);
    }
    line += '\n';
  }
  if (sink) {
    sink(line);
  } else {
    WriteAll(line);
  }
}

bool LogRateLimit::Allow(uint64_t* held_back, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= period_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++held_back_;
    return false;
  }
  ++in_window_;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

}  // namespace yoco
