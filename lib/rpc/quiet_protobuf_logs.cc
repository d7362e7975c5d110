// A rate-limited protobuf log handler.
#include "lib/rpc/quiet_protobuf_logs.h"

#include <google/protobuf/stubs/logging.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>

#include "absl/synchronization/mutex.h"

namespace yoco {
namespace {

std::atomic<uint64_t> suppressed{0};

void Handler(google::protobuf::LogLevel level, const char* file, int line,
             const std::string& message) {
  static absl::Mutex mu;
  static auto last = std::chrono::steady_clock::time_point();
  static uint64_t held_back = 0;
  absl::MutexLock lock(&mu);
  const auto now = std::chrono::steady_clock::now();
  if (level < google::protobuf::LOGLEVEL_FATAL && now - last < std::chrono::seconds(1)) {
    ++held_back;
    ++suppressed;
    return;
  }
  last = now;
  std::cerr << "[libprotobuf " << file << ":" << line << "] " << message;
  if (held_back > 0) std::cerr << " (" << held_back << " similar messages held back)";
  std::cerr << std::endl;
  held_back = 0;
}

}  // namespace

void QuietProtobufLogs() { google::protobuf::SetLogHandler(&Handler); }

uint64_t SuppressedProtobufLogs() { return suppressed.load(); }

}  // namespace yoco
