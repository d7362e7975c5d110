// The stream's ops and its lifetime. Cancelling happens outside the lock: a cancelled op's
// completion may run at once on this thread and end itself.
#include "services/router/in_flight_ops.h"

namespace yoco {

grpc::ClientContext* InFlightOps::Keep(std::unique_ptr<grpc::ClientContext> context) {
  absl::MutexLock lock(&mu_);
  ++ops_;
  contexts_.push_back(std::move(context));
  return contexts_.back().get();
}

DecodeRelay* InFlightOps::Keep(std::unique_ptr<DecodeRelay> relay) {
  absl::MutexLock lock(&mu_);
  ++ops_;
  relays_.push_back(std::move(relay));
  return relays_.back().get();
}

PrefillRelay* InFlightOps::Keep(std::unique_ptr<PrefillRelay> relay) {
  absl::MutexLock lock(&mu_);
  ++ops_;
  prefill_relays_.push_back(std::move(relay));
  return prefill_relays_.back().get();
}

grpc::Alarm* InFlightOps::Keep(std::unique_ptr<grpc::Alarm> alarm) {
  absl::MutexLock lock(&mu_);
  ++ops_;
  alarms_.push_back(std::move(alarm));
  return alarms_.back().get();
}

void InFlightOps::Begin() {
  absl::MutexLock lock(&mu_);
  ++ops_;
}

bool InFlightOps::End() {
  absl::MutexLock lock(&mu_);
  return --ops_ == 0 && call_done_;
}

bool InFlightOps::CallDone() {
  absl::MutexLock lock(&mu_);
  call_done_ = true;
  return ops_ == 0;
}

void InFlightOps::Cancel() {
  std::vector<grpc::ClientContext*> contexts;
  std::vector<DecodeRelay*> relays;
  std::vector<PrefillRelay*> prefill_relays;
  std::vector<grpc::Alarm*> alarms;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (auto& c : contexts_) contexts.push_back(c.get());
    for (auto& r : relays_) relays.push_back(r.get());
    for (auto& r : prefill_relays_) prefill_relays.push_back(r.get());
    for (auto& a : alarms_) alarms.push_back(a.get());
  }
  for (grpc::ClientContext* c : contexts) c->TryCancel();
  for (DecodeRelay* r : relays) r->Cancel();
  for (PrefillRelay* r : prefill_relays) r->Cancel();
  for (grpc::Alarm* a : alarms) a->Cancel();
}

bool InFlightOps::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

DecodeRelay* InFlightOps::last_relay() const {
  absl::MutexLock lock(&mu_);
  return relays_.empty() ? nullptr : relays_.back().get();
}

}  // namespace yoco
