// Readers wait on the mutex's condition (new events), not on a condition variable of their own.
#include "lib/routing/cache_event_log.h"

#include <algorithm>

namespace yoco {

void CacheEventLog::Append(std::vector<CacheEvent> events) {
  if (events.empty()) return;
  absl::MutexLock lock(&mu_);
  for (CacheEvent& e : events) events_.push_back(std::move(e));
  while (events_.size() > capacity_) {
    events_.pop_front();
    ++first_;
  }
}

CacheEventLog::Batch CacheEventLog::Read(uint64_t from, size_t max, absl::Duration wait) const {
  absl::MutexLock lock(&mu_);
  auto has_news = [this, from]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return first_ + events_.size() > from; };
  mu_.AwaitWithTimeout(absl::Condition(&has_news), wait);
  Batch batch;
  batch.missed = from < first_;
  const uint64_t start = std::max(from, first_);
  const uint64_t end = std::min<uint64_t>(first_ + events_.size(), start + max);
  for (uint64_t seq = start; seq < end; ++seq) batch.events.push_back(events_[seq - first_]);
  batch.next = std::max(end, from);
  return batch;
}

uint64_t CacheEventLog::end() const {
  absl::MutexLock lock(&mu_);
  return first_ + events_.size();
}

}  // namespace yoco
