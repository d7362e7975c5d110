// SchedulingClass: who a queued request is, as the queues that order requests (a prefill
// worker's engine, a decode worker's batch) see it. The router fills it from the request's
// `priority` and its tenant's defaults (TenantLimits) and sends it with the work.
#ifndef YOCO_LIB_SCHEDULING_SCHEDULING_CLASS_H_
#define YOCO_LIB_SCHEDULING_SCHEDULING_CLASS_H_

#include <cstdint>
#include <string>

namespace yoco {

// The ranges a priority and a weight are held to (the tenant file's and the request's).
inline constexpr int32_t kMaxSchedulingPriority = 100;  // priorities: [-100, 100]
inline constexpr uint32_t kMaxSchedulingWeight = 1000;  // weights: [1, 1000]
// Work no client waits for (the router's snapshot of a finished conversation): after every
// request, whatever its priority. Beyond the range a request may ask for.
inline constexpr int32_t kBackgroundPriority = kMaxSchedulingPriority + 1;

struct SchedulingClass {
  std::string tenant;    // "" without tenants: everyone is one tenant
  int32_t priority = 0;  // lower values go first (as vLLM's `priority`)
  uint32_t weight = 1;   // within a priority, a tenant of weight w gets w turns to weight 1's
};

}  // namespace yoco

#endif  // YOCO_LIB_SCHEDULING_SCHEDULING_CLASS_H_
