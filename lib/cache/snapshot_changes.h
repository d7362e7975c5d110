// SnapshotChanges: a prefill worker's snapshot placement as a stream of CacheEvents, for the
// worker's WatchCache. Each call compares the store's listing with the one before: a snapshot
// that appeared or moved between tiers is stored, one that vanished is evicted or expired as
// the store says it went. The listing is taken again only when the store changed (its
// generation) or a held snapshot's TTL has passed, so polling an idle store costs a lock.
//
// Not thread-safe: one per watcher.
#ifndef YOCO_LIB_CACHE_SNAPSHOT_CHANGES_H_
#define YOCO_LIB_CACHE_SNAPSHOT_CHANGES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/time/time.h"
#include "lib/cache/cache_event.h"
#include "lib/cache/snapshot_store.h"

namespace yoco {

class SnapshotChanges {
 public:
  // `now` is the store's clock. Events name no worker: the watcher knows which one it watches.
  explicit SnapshotChanges(
      SnapshotStore& store, std::function<absl::Time()> now = [] { return absl::Now(); })
      : store_(store), now_(std::move(now)) {}

  // What changed since the last call; the first call gives every snapshot held, as stored.
  std::vector<CacheEvent> Next();

 private:
  SnapshotStore& store_;
  const std::function<absl::Time()> now_;
  bool listed_ = false;
  uint64_t generation_ = 0;                          // the store's, when last listed
  absl::Time next_expiry_ = absl::InfiniteFuture();  // the earliest TTL among those held
  std::map<BlockKey, bool> held_;                    // key -> on disk only
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_SNAPSHOT_CHANGES_H_
