// CacheEventLog: what the router saw happen to the prefill workers' snapshots (stored, evicted,
// expired), in order, for WatchCache streams — an external KV-aware router follows placement
// from it. A bounded ring with sequence numbers: each watcher keeps its own place, and one that
// falls more than the ring behind is told so (it lists the cache again) instead of slowing the
// probes that append.
#ifndef YOCO_LIB_ROUTING_CACHE_EVENT_LOG_H_
#define YOCO_LIB_ROUTING_CACHE_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/cache/cache_event.h"

namespace yoco {

class CacheEventLog {
 public:
  explicit CacheEventLog(size_t capacity = 4096) : capacity_(capacity) {}

  void Append(std::vector<CacheEvent> events);

  struct Batch {
    std::vector<CacheEvent> events;
    uint64_t next = 0;    // the sequence number to read from next time
    bool missed = false;  // events between `after` and the first returned were dropped
  };
  // The events from sequence number `from` on (at most `max`), waiting up to `wait` for one.
  Batch Read(uint64_t from, size_t max, absl::Duration wait) const;
  // The sequence number the next event will get: a new watcher starts there.
  uint64_t end() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<CacheEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t first_ ABSL_GUARDED_BY(mu_) = 0;  // the sequence number of events_.front()
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_CACHE_EVENT_LOG_H_
