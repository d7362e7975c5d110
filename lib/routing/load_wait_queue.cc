// The wait queue's bookkeeping: waiters by place, and each tenant's places in order.
#include "lib/routing/load_wait_queue.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace yoco {

absl::StatusOr<uint64_t> LoadWaitQueue::Push(const std::string& tenant, Wake wake, uint64_t place) {
  Wake displaced;
  {
    absl::MutexLock lock(&mu_);
    if (waiters_.size() >= max_waiting_) {
      // Full: the busiest tenant's newest waiter gives way to a tenant that waits with fewer.
      auto busiest = by_tenant_.end();
      for (auto it = by_tenant_.begin(); it != by_tenant_.end(); ++it) {
        if (busiest == by_tenant_.end() || it->second.size() > busiest->second.size()) busiest = it;
      }
      auto mine = by_tenant_.find(tenant);
      const size_t my_count = mine == by_tenant_.end() ? 0 : mine->second.size();
      if (busiest == by_tenant_.end() || busiest->second.size() <= my_count + 1) {
        return absl::ResourceExhaustedError(
            absl::StrCat("every worker is at its queue bound and ", waiters_.size(),
                         " requests already wait at the router (--max-waiting-requests ",
                         max_waiting_, "); retry later"));
      }
      const uint64_t newest = busiest->second.back();
      busiest->second.pop_back();
      displaced = std::move(waiters_[newest].wake);
      waiters_.erase(newest);
      if (busiest->second.empty()) by_tenant_.erase(busiest);
    }
    if (place == 0) place = next_place_++;
    waiters_[place] = Waiter{tenant, std::move(wake)};
    std::deque<uint64_t>& places = by_tenant_[tenant];
    places.insert(std::upper_bound(places.begin(), places.end(), place), place);
  }
  if (displaced) displaced(false);
  return place;
}

bool LoadWaitQueue::Remove(uint64_t place) {
  absl::MutexLock lock(&mu_);
  auto it = waiters_.find(place);
  if (it == waiters_.end()) return false;
  auto tenant = by_tenant_.find(it->second.tenant);
  std::deque<uint64_t>& places = tenant->second;
  places.erase(std::find(places.begin(), places.end(), place));
  if (places.empty()) by_tenant_.erase(tenant);
  waiters_.erase(it);
  return true;
}

void LoadWaitQueue::WakeNext(size_t n) {
  std::vector<Wake> woken;
  {
    absl::MutexLock lock(&mu_);
    while (woken.size() < n && !by_tenant_.empty()) {
      // The first tenant after the last one woken, in name order, wrapping around.
      auto tenant = by_tenant_.upper_bound(last_tenant_);
      if (tenant == by_tenant_.end()) tenant = by_tenant_.begin();
      last_tenant_ = tenant->first;
      const uint64_t place = tenant->second.front();
      tenant->second.pop_front();
      if (tenant->second.empty()) by_tenant_.erase(tenant);
      woken.push_back(std::move(waiters_[place].wake));
      waiters_.erase(place);
    }
  }
  for (Wake& wake : woken) wake(true);
}

size_t LoadWaitQueue::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

}  // namespace yoco
