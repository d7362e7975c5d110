// The wait queue's bookkeeping: waiters by place, each tenant's places (for who gives way when
// full), and the order they are woken in.
#include "lib/routing/load_wait_queue.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace yoco {

absl::StatusOr<uint64_t> LoadWaitQueue::Push(const SchedulingClass& c, Wake wake, uint64_t place) {
  Wake displaced;
  {
    absl::MutexLock lock(&mu_);
    if (waiters_.size() >= max_waiting_) {
      // Full: the busiest tenant's newest waiter gives way to a tenant that waits with fewer.
      auto busiest = by_tenant_.end();
      for (auto it = by_tenant_.begin(); it != by_tenant_.end(); ++it) {
        if (busiest == by_tenant_.end() || it->second.size() > busiest->second.size()) busiest = it;
      }
      auto mine = by_tenant_.find(c.tenant);
      const size_t my_count = mine == by_tenant_.end() ? 0 : mine->second.size();
      if (busiest == by_tenant_.end() || busiest->second.size() <= my_count + 1) {
        return absl::ResourceExhaustedError(
            absl::StrCat("every worker is at its queue bound and ", waiters_.size(),
                         " requests already wait at the router (--max-waiting-requests ",
                         max_waiting_, "); retry later"));
      }
      const uint64_t newest = *busiest->second.rbegin();
      displaced = std::move(waiters_[newest].wake);
      ForgetLocked(newest);
    }
    if (place == 0) place = next_place_++;
    waiters_[place] = Waiter{c.tenant, std::move(wake)};
    by_tenant_[c.tenant].insert(place);
    order_.Add(place, c);
  }
  if (displaced) displaced(false);
  return place;
}

bool LoadWaitQueue::Remove(uint64_t place) {
  absl::MutexLock lock(&mu_);
  if (!waiters_.contains(place)) return false;
  ForgetLocked(place);
  return true;
}

void LoadWaitQueue::ForgetLocked(uint64_t place) {
  auto it = waiters_.find(place);
  auto tenant = by_tenant_.find(it->second.tenant);
  tenant->second.erase(place);
  if (tenant->second.empty()) by_tenant_.erase(tenant);
  order_.Remove(place);
  waiters_.erase(it);
}

void LoadWaitQueue::WakeNext(size_t n) {
  std::vector<Wake> woken;
  {
    absl::MutexLock lock(&mu_);
    while (woken.size() < n && !order_.empty()) {
      const uint64_t place = *order_.Peek();
      order_.Pop();  // charges the tenant its turn; ForgetLocked's Remove then finds nothing
      woken.push_back(std::move(waiters_[place].wake));
      ForgetLocked(place);
    }
  }
  for (Wake& wake : woken) wake(true);
}

size_t LoadWaitQueue::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

}  // namespace yoco
