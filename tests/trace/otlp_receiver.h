// OtlpReceiver: otlp_receiver.mjs run for a test — an OTLP/HTTP endpoint whose spans, decoded
// with the official OTLP definitions, the test reads back as JSON (one object per span).
#ifndef YOCO_TESTS_TRACE_OTLP_RECEIVER_H_
#define YOCO_TESTS_TRACE_OTLP_RECEIVER_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/cluster/service_process.h"

namespace yoco::testing {

class OtlpReceiver {
 public:
  static absl::StatusOr<std::unique_ptr<OtlpReceiver>> Start();
  ~OtlpReceiver();

  // http://127.0.0.1:PORT/v1/traces
  std::string endpoint() const;
  // Every span received so far.
  std::vector<nlohmann::json> Spans() const;

 private:
  OtlpReceiver() = default;
  std::string dir_;
  std::unique_ptr<ServiceProcess> process_;
  int port_ = 0;
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_TRACE_OTLP_RECEIVER_H_
