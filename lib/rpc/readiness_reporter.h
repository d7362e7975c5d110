// ReadinessReporter: keeps a service's readiness (its role's gRPC health service name) in step
// with whether it can take one more request, so that Kubernetes (and any balancer watching
// health) sends nothing to a worker that would refuse it, and sends again once it would not.
// NOT_SERVING from SIGTERM on, whatever the worker says.
#ifndef YOCO_LIB_RPC_READINESS_REPORTER_H_
#define YOCO_LIB_RPC_READINESS_REPORTER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "lib/threading/periodic_task.h"

namespace yoco {

class ReadinessReporter {
 public:
  // Polls `can_admit` every `interval` on its own thread. Destroy it before `server`.
  ReadinessReporter(grpc::Server& server, std::string service, std::function<bool()> can_admit,
                    absl::Duration interval = absl::Milliseconds(200));
  ReadinessReporter(const ReadinessReporter&) = delete;
  ReadinessReporter& operator=(const ReadinessReporter&) = delete;

  // How often readiness changed (for metrics and tests).
  uint64_t flips() const { return flips_.load(); }
  bool ready() const { return ready_.load(); }

 private:
  void Poll();

  grpc::Server& server_;
  const std::string service_;
  const std::function<bool()> can_admit_;
  std::atomic<bool> ready_{true};  // StartGrpcServer starts the service SERVING
  std::atomic<uint64_t> flips_{0};
  PeriodicTask poller_;  // last: it polls through the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_RPC_READINESS_REPORTER_H_
