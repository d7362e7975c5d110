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
      interval_(interval),
      thread_([this] { Run(); }) {}

ReadinessReporter::~ReadinessReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ReadinessReporter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Draining: the graceful shutdown has set NOT_SERVING for good.
    if (!Draining()) {
      const bool ready = can_admit_();
      if (ready != ready_.load()) {
        if (grpc::HealthCheckServiceInterface* health = server_.GetHealthCheckService()) {
          health->SetServingStatus(service_, ready);
        }
        ready_ = ready;
        ++flips_;
      }
    }
    cv_.wait_for(lock, absl::ToChronoMilliseconds(interval_));
  }
}

}  // namespace yoco
