// CacheEvent: something that happened to a prefill worker's snapshot (stored, moved between
// tiers, evicted, expired), as WatchCache streams send it to external KV-aware routers.
#ifndef YOCO_LIB_CACHE_CACHE_EVENT_H_
#define YOCO_LIB_CACHE_CACHE_EVENT_H_

#include <string>

#include "absl/time/time.h"
#include "lib/cache/block_key.h"

namespace yoco {

struct CacheEvent {
  enum class Kind { kStored, kEvicted, kExpired };
  Kind kind = Kind::kStored;
  BlockKey key;
  std::string worker;      // the prefill worker's address
  bool disk_only = false;  // stored: on the worker's disk tier only
  absl::Time time;         // when it was seen (the router: a probe's relisting)
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_CACHE_EVENT_H_
