// Snapshot bookkeeping: blocks are reference counted by the snapshots whose chains hold them.
#include "lib/cache/snapshot_store.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace yoco {

const char* CacheTierName(CacheTier tier) {
  switch (tier) {
    case CacheTier::kNone:
      return "none";
    case CacheTier::kMemory:
      return "memory";
    case CacheTier::kDisk:
      return "disk";
  }
  return "none";
}

const char* CacheMissName(CacheMiss miss) {
  switch (miss) {
    case CacheMiss::kHit:
      return "hit";
    case CacheMiss::kNoSnapshot:
      return "none";
    case CacheMiss::kEvicted:
      return "evicted";
    case CacheMiss::kExpired:
      return "expired";
    case CacheMiss::kFingerprintMismatch:
      return "fingerprint_mismatch";
    case CacheMiss::kCorrupt:
      return "corrupt";
  }
  return "none";
}

SnapshotStore::SnapshotStore(const ModelConfig& config, SnapshotStoreOptions options)
    : kv_dim_(config.kv_dim()),
      block_bytes_(kCacheBlockTokens *
                   (2 * config.kv_dim() * int64_t{sizeof(float)} + int64_t{sizeof(int32_t)})),
      options_(std::move(options)) {}

int64_t SnapshotStore::SnapshotBytes(const Snapshot& s) const {
  int64_t bytes = static_cast<int64_t>(s.chain.size()) * block_bytes_;
  for (const auto& layer : s.self_states) bytes += layer.size() * sizeof(float);
  return bytes;
}

SnapshotInfo SnapshotStore::InfoLocked(const BlockKey& key, const Snapshot& s) const {
  SnapshotInfo info;
  info.key = key;
  info.tokens = static_cast<int64_t>(s.chain.size()) * kCacheBlockTokens;
  info.bytes = SnapshotBytes(s);
  info.pinned = s.pinned;
  info.tier = CacheTier::kMemory;
  info.hits = s.hits;
  info.expires = s.expires;
  return info;
}

void SnapshotStore::RemoveLocked(std::map<BlockKey, Snapshot>::iterator it, CacheMiss reason) {
  for (const auto& layer : it->second.self_states) stats_.bytes -= layer.size() * sizeof(float);
  for (const BlockKey& bk : it->second.chain) {
    auto block = blocks_.find(bk);
    if (--block->second.refs == 0) {
      blocks_.erase(block);
      stats_.bytes -= block_bytes_;
    }
  }
  if (removed_.emplace(it->first, reason).second) removed_order_.push_back(it->first);
  while (removed_order_.size() > options_.remembered_removals) {
    removed_.erase(removed_order_.front());
    removed_order_.pop_front();
  }
  (reason == CacheMiss::kExpired ? stats_.expirations : stats_.evictions)++;
  snapshots_.erase(it);
  ++generation_;
}

void SnapshotStore::ExpireLocked() {
  const absl::Time now = options_.now();
  for (auto it = snapshots_.begin(); it != snapshots_.end();) {
    auto next = std::next(it);
    if (it->second.expires <= now) RemoveLocked(it, CacheMiss::kExpired);
    it = next;
  }
}

void SnapshotStore::EnforceBudgetLocked(const BlockKey& keep) {
  while (stats_.bytes > options_.budget_bytes) {
    auto victim = snapshots_.end();
    for (auto it = snapshots_.begin(); it != snapshots_.end(); ++it) {
      if (it->second.pinned || it->first == keep) continue;
      if (victim == snapshots_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == snapshots_.end()) return;
    RemoveLocked(victim, CacheMiss::kEvicted);
  }
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Insert(absl::Span<const BlockKey> keys,
                                                   absl::Span<const int32_t> tokens,
                                                   const SequenceState& state,
                                                   const SnapshotRetention& retention) {
  const int64_t n = static_cast<int64_t>(keys.size()) * kCacheBlockTokens;
  if (keys.empty() || state.position != n || static_cast<int64_t>(tokens.size()) < n ||
      static_cast<int64_t>(state.shared_k.size()) < n * kv_dim_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a snapshot must sit on a block boundary: ", keys.size(), " blocks, state at ",
                     state.position, ", ", tokens.size(), " tokens"));
  }
  const absl::Time now = options_.now();
  const absl::Time expires = retention.ttl == absl::InfiniteDuration()
                                 ? absl::InfiniteFuture()
                                 : now + std::max(retention.ttl, absl::ZeroDuration());
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  auto existing = snapshots_.find(keys.back());
  if (existing != snapshots_.end()) {
    Snapshot& s = existing->second;
    s.pinned |= retention.pinned;
    s.expires = std::max(s.expires, expires);
    s.last_use = ++use_clock_;
    ++generation_;
    return InfoLocked(existing->first, s);
  }
  Snapshot s;
  s.chain.assign(keys.begin(), keys.end());
  s.self_states = state.self_states;
  s.pinned = retention.pinned;
  s.expires = expires;
  s.last_use = ++use_clock_;
  for (const auto& layer : s.self_states) stats_.bytes += layer.size() * sizeof(float);
  for (size_t b = 0; b < keys.size(); ++b) {
    KvBlock& block = blocks_[keys[b]];
    if (block.refs++ > 0) continue;
    const int64_t row0 = static_cast<int64_t>(b) * kCacheBlockTokens;
    block.tokens.assign(tokens.begin() + row0, tokens.begin() + row0 + kCacheBlockTokens);
    block.k.assign(state.shared_k.begin() + row0 * kv_dim_,
                   state.shared_k.begin() + (row0 + kCacheBlockTokens) * kv_dim_);
    block.v.assign(state.shared_v.begin() + row0 * kv_dim_,
                   state.shared_v.begin() + (row0 + kCacheBlockTokens) * kv_dim_);
    stats_.bytes += block_bytes_;
  }
  auto it = snapshots_.emplace(keys.back(), std::move(s)).first;
  removed_.erase(keys.back());  // the order queue may keep it; erasing a missing key is fine
  ++generation_;
  EnforceBudgetLocked(keys.back());
  if (stats_.bytes > options_.budget_bytes) {
    RemoveLocked(it, CacheMiss::kEvicted);
    return absl::ResourceExhaustedError(
        absl::StrCat("the snapshot does not fit the cache budget of ", options_.budget_bytes,
                     " bytes next to the pinned snapshots"));
  }
  return InfoLocked(it->first, it->second);
}

SnapshotHit SnapshotStore::Lookup(absl::Span<const BlockKey> keys,
                                  absl::Span<const int32_t> tokens) {
  SnapshotHit hit;
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  ++stats_.lookups;
  for (size_t j = std::min(keys.size(), tokens.size() / kCacheBlockTokens); j > 0; --j) {
    auto it = snapshots_.find(keys[j - 1]);
    if (it == snapshots_.end()) continue;
    Snapshot& s = it->second;
    // The key covers the tokens; comparing them as well makes a hash collision harmless.
    bool same = s.chain.size() == j;
    for (size_t b = 0; same && b < j; ++b) {
      const KvBlock& block = blocks_.at(s.chain[b]);
      same = std::equal(block.tokens.begin(), block.tokens.end(),
                        tokens.begin() + b * kCacheBlockTokens);
    }
    if (!same) continue;
    const int64_t n = static_cast<int64_t>(j) * kCacheBlockTokens;
    hit.state.position = n;
    hit.state.self_states = s.self_states;
    hit.state.shared_k.resize(n * kv_dim_);
    hit.state.shared_v.resize(n * kv_dim_);
    for (size_t b = 0; b < j; ++b) {
      const KvBlock& block = blocks_.at(s.chain[b]);
      const size_t offset = b * kCacheBlockTokens * kv_dim_;
      std::memcpy(hit.state.shared_k.data() + offset, block.k.data(), block.k.size() * 4);
      std::memcpy(hit.state.shared_v.data() + offset, block.v.data(), block.v.size() * 4);
    }
    hit.tokens = n;
    hit.key = it->first;
    hit.tier = CacheTier::kMemory;
    hit.miss = CacheMiss::kHit;
    s.last_use = ++use_clock_;
    ++s.hits;
    ++stats_.hits;
    stats_.hit_tokens += n;
    return hit;
  }
  hit.miss = CacheMiss::kNoSnapshot;
  for (size_t j = keys.size(); j > 0; --j) {
    auto it = removed_.find(keys[j - 1]);
    if (it != removed_.end()) {
      hit.miss = it->second;
      break;
    }
  }
  return hit;
}

std::vector<SnapshotInfo> SnapshotStore::List() {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  std::vector<SnapshotInfo> out;
  for (const auto& [key, s] : snapshots_) out.push_back(InfoLocked(key, s));
  return out;
}

bool SnapshotStore::Evict(const BlockKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = snapshots_.find(key);
  if (it == snapshots_.end()) return false;
  RemoveLocked(it, CacheMiss::kEvicted);
  return true;
}

size_t SnapshotStore::EvictAll() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  while (!snapshots_.empty()) {
    RemoveLocked(snapshots_.begin(), CacheMiss::kEvicted);
    ++n;
  }
  return n;
}

uint64_t SnapshotStore::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

SnapshotStoreStats SnapshotStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SnapshotStoreStats s = stats_;
  s.snapshots = static_cast<int64_t>(snapshots_.size());
  return s;
}

}  // namespace yoco
