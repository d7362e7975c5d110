// LoadWaitQueue: requests that every worker refused for load (RESOURCE_EXHAUSTED: their queues
// are at their bound), waiting at the router for room instead of failing at once. Bounded, and
// woken in the order the workers' queues use (FairOrder: priority, then tenants by weight, then
// arrival); when the queue is full a newcomer whose tenant waits with fewer requests than the
// busiest tenant takes the place of that tenant's newest waiter, so one tenant's burst can
// neither starve another's requests nor keep them out. Room is signalled by whoever sees it free (a
// prefill ending at this router) and by a periodic tick (room freed by other routers' requests, or
// workers coming back); a woken waiter that finds no room again waits again with its first place.
//
// Thread-safe. Wake callbacks run on the thread that calls WakeNext or Push (for the waiter a
// newcomer displaces), never under the queue's lock, each exactly once unless Remove took the
// waiter out first.
#ifndef YOCO_LIB_ROUTING_LOAD_WAIT_QUEUE_H_
#define YOCO_LIB_ROUTING_LOAD_WAIT_QUEUE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/scheduling/fair_order.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {

class LoadWaitQueue {
 public:
  // Called once: true when it is the waiter's turn to try again, false when a newcomer of a
  // tenant with fewer waiters took its place (the waiter then fails with RESOURCE_EXHAUSTED).
  using Wake = std::function<void(bool turn)>;

  // `max_waiting`: waiters across all tenants (0: nobody waits, every refusal is final).
  explicit LoadWaitQueue(size_t max_waiting) : max_waiting_(max_waiting) {}

  // Queues a waiter of class `c` (tenant "" without tenants). `place`: 0 for a new waiter, or the
  // place Push returned before, for a waiter woken that found no room (it keeps its turn within its
  // tenant). Returns its place; RESOURCE_EXHAUSTED, naming the bound, when the queue is full and
  // the tenant already waits with as many requests as any other.
  absl::StatusOr<uint64_t> Push(const SchedulingClass& c, Wake wake, uint64_t place = 0);

  // Takes out a waiter that gave up (cancelled, deadline): true when it was still waiting, and
  // then its Wake never runs.
  bool Remove(uint64_t place);

  // Wakes up to `n` waiters, each the next in FairOrder.
  void WakeNext(size_t n = 1);

  size_t waiting() const;
  size_t max_waiting() const { return max_waiting_; }

 private:
  // Takes a queued place out of every index.
  void ForgetLocked(uint64_t place) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_waiting_;
  mutable absl::Mutex mu_;
  uint64_t next_place_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Wake> waiters_ ABSL_GUARDED_BY(mu_);  // by place
  FairOrder order_ ABSL_GUARDED_BY(mu_);                   // of places
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_LOAD_WAIT_QUEUE_H_
