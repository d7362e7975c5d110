// The log's flags.
#include "lib/log/log_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "lib/log/log.h"

ABSL_FLAG(std::string, log_format, "text",
          "text: one line per event for a person; json: one JSON object per line (time, level, "
          "program, message, and fields such as request_id) for a log pipeline");
ABSL_FLAG(std::string, log_level, "info",
          "the least severe lines written: debug, info, warning or error");

namespace yoco {

absl::Status ConfigureLogFromFlags(const std::string& program) {
  absl::StatusOr<LogFormat> format = ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  if (!format.ok())
    return absl::InvalidArgumentError(absl::StrCat("--log-format: ", format.status().message()));
  absl::StatusOr<LogLevel> level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok())
    return absl::InvalidArgumentError(absl::StrCat("--log-level: ", level.status().message()));
  LogSettings settings;
  settings.program = program;
  settings.format = *format;
  settings.min_level = *level;
  ConfigureLog(std::move(settings));
  return absl::OkStatus();
}

}  // namespace yoco
