// The diff between two listings of a snapshot store, as cache events.
#include "lib/cache/snapshot_changes.h"

#include <algorithm>

namespace yoco {

std::vector<CacheEvent> SnapshotChanges::Next() {
  // Read before listing: a change made while listing shows as a new generation next time.
  const uint64_t generation = store_.generation();
  const absl::Time now = now_();
  if (listed_ && generation == generation_ && now < next_expiry_) return {};
  std::vector<SnapshotInfo> listing = store_.List();  // expires what is due
  listed_ = true;
  generation_ = generation;
  next_expiry_ = absl::InfiniteFuture();

  std::vector<CacheEvent> events;
  std::map<BlockKey, bool> held;
  for (const SnapshotInfo& info : listing) {
    const bool disk_only = info.tier == CacheTier::kDisk;
    held[info.key] = disk_only;
    next_expiry_ = std::min(next_expiry_, info.expires);
    auto before = held_.find(info.key);
    if (before == held_.end() || before->second != disk_only) {
      events.push_back({.kind = CacheEvent::Kind::kStored,
                        .key = info.key,
                        .disk_only = disk_only,
                        .time = now});
    }
  }
  for (const auto& [key, disk_only] : held_) {
    if (held.contains(key)) continue;
    const CacheEvent::Kind kind = store_.WhyGone(key) == CacheMiss::kExpired
                                      ? CacheEvent::Kind::kExpired
                                      : CacheEvent::Kind::kEvicted;
    events.push_back({.kind = kind, .key = key, .time = now});
  }
  held_ = std::move(held);
  return events;
}

}  // namespace yoco
