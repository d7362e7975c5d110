// The router's access log (--access-log): one line per finished Generate request, with who asked,
// what it cost, how it ended and which workers served it, in the log layer's format (text or
// JSON lines).
#ifndef YOCO_SERVICES_ROUTER_ACCESS_LOG_H_
#define YOCO_SERVICES_ROUTER_ACCESS_LOG_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "yoco/v1/yoco.pb.h"

namespace yoco {

struct AccessLogEntry {
  std::string request_id;
  std::string trace_id;  // empty when the request was not traced
  std::string tenant;    // empty without --tenants
  grpc::Status status;
  v1::Finish finish;  // usage, timings and reason (a failure's too)
  double duration_ms = 0;
  int retries = 0;
  std::string prefill;  // "local", the prefill worker's address, or empty when none was called
  std::string decode;   // the last decode worker called, or empty
  uint64_t model_version = 0;  // 0: none chosen
  int32_t priority = 0;
};

void LogRequestFinished(const AccessLogEntry& entry);

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ACCESS_LOG_H_
