// A rate-limited protobuf log handler.
#include "lib/rpc/quiet_protobuf_logs.h"

#include <google/protobuf/stubs/logging.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/log/log.h"

namespace yoco {
namespace {

std::atomic<uint64_t> suppressed{0};

void Handler(google::protobuf::LogLevel level, const char* file, int line,
             const std::string& message) {
  static LogRateLimit* limit = new LogRateLimit(1, absl::Seconds(1));
  uint64_t held_back = 0;
  if (level < google::protobuf::LOGLEVEL_FATAL && !limit->Allow(&held_back)) {
    ++suppressed;
    return;
  }
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                        : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarning
                                                                      : LogLevel::kInfo;
  LogLine(ours, message)
      .With("source", absl::StrCat("libprotobuf ", file, ":", line))
      .HeldBack(held_back);
}

}  // namespace

void QuietProtobufLogs() { google::protobuf::SetLogHandler(&Handler); }

uint64_t SuppressedProtobufLogs() { return suppressed.load(); }

}  // namespace yoco
