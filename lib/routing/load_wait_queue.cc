// The wait queue's bookkeeping: waiters by place, and the order they are woken in (which also
// knows each tenant's places, for who gives way when full).
#include "lib/routing/load_wait_queue.h"

#include <algorithm>
#include <map>
#include <string>
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
      const std::map<std::string, size_t> counts = order_.CountsByTenant();
      auto busiest =
          std::max_element(counts.begin(), counts.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      auto mine = counts.find(c.tenant);
      const size_t my_count = mine == counts.end() ? 0 : mine->second;
      if (busiest == counts.end() || busiest->second <= my_count + 1) {
        return absl::ResourceExhaustedError(
            absl::StrCat("every worker is at its queue bound and ", waiters_.size(),
                         " requests already wait at the router (--max-waiting-requests ",
                         max_waiting_, "); retry later"));
      }
      const uint64_t newest = *order_.Newest(busiest->first);
      displaced = std::move(waiters_[newest]);
      ForgetLocked(newest);
    }
    if (place == 0) place = next_place_++;
    waiters_[place] = std::move(wake);
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
  order_.Remove(place);
  waiters_.erase(place);
}

void LoadWaitQueue::WakeNext(size_t n) {
  std::vector<Wake> woken;
  {
    absl::MutexLock lock(&mu_);
    while (woken.size() < n && !order_.empty()) {
      const uint64_t place = *order_.Peek();
      order_.Pop();  // charges the tenant its turn; ForgetLocked's Remove then finds nothing
      woken.push_back(std::move(waiters_[place]));
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
