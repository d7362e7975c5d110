// Readiness polling: a status is set only when it changes.
#include "lib/rpc/readiness_reporter.h"

#include <grpcpp/health_check_service_interface.h>

#include "lib/rpc/graceful_shutdown.h"

namespace yoco {

ReadinessReporter::ReadinessReporter(grpc::Server& server, std::string service,
                                     std::function<bool()> can_admit, absl::Duration interval)
    : server_(server),
      service_(std::move(service)),
      can_admit_(std::move(can_admit)),
      poller_(interval, [this] { Poll(); }) {}

void ReadinessReporter::Poll() {
  // Draining: the graceful shutdown has set NOT_SERVING for good.
  if (Draining()) return;
  const bool ready = can_admit_();
  if (ready == ready_.load()) return;
  if (grpc::HealthCheckServiceInterface* health = server_.GetHealthCheckService()) {
    health->SetServingStatus(service_, ready);
  }
  ready_ = ready;
  ++flips_;
}

}  // namespace yoco
