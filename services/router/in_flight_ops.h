// InFlightOps: what a GenerateStream has in flight — worker calls, relays, timers and
// the load queue's wait — and so when the stream may delete itself: only once gRPC is done with
// the call and every op has ended, whichever comes last. Contexts, relays and alarms are kept
// until the end, so a cancellation from another thread never races their destruction.
#ifndef YOCO_SERVICES_ROUTER_IN_FLIGHT_OPS_H_
#define YOCO_SERVICES_ROUTER_IN_FLIGHT_OPS_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "services/router/decode_relay.h"
#include "services/router/prefill_relay.h"

namespace yoco {

class InFlightOps {
 public:
  // Each Keep counts an op that ends with End. The pointer lives as long as this object.
  grpc::ClientContext* Keep(std::unique_ptr<grpc::ClientContext> context);
  DecodeRelay* Keep(std::unique_ptr<DecodeRelay> relay);
  PrefillRelay* Keep(std::unique_ptr<PrefillRelay> relay);
  grpc::Alarm* Keep(std::unique_ptr<grpc::Alarm> alarm);
  void Begin();  // an op with nothing to keep
  // An op ended. True when the owner must now delete itself (the call was done).
  [[nodiscard]] bool End();
  // gRPC is done with the call. True when the owner must now delete itself (no op left).
  [[nodiscard]] bool CallDone();

  // Cancels everything kept; an op kept later must check cancelled() after Keep.
  void Cancel();
  bool cancelled() const;
  DecodeRelay* last_relay() const;  // null before the first decode

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<DecodeRelay>> relays_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PrefillRelay>> prefill_relays_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int ops_ ABSL_GUARDED_BY(mu_) = 0;
  bool call_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_IN_FLIGHT_OPS_H_
