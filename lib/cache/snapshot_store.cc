// Snapshot bookkeeping: blocks are reference counted by the snapshots whose chains hold them.
#include "lib/cache/snapshot_store.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

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
    case CacheMiss::kUnauthenticated:
      return "unauthenticated";
  }
  return "none";
}

CacheMiss CacheMissOfFileError(const absl::Status& error) {
  switch (error.code()) {
    case absl::StatusCode::kFailedPrecondition:  // another model's file, or another version
      return CacheMiss::kFingerprintMismatch;
    case absl::StatusCode::kUnauthenticated:
      return CacheMiss::kUnauthenticated;
    default:
      return CacheMiss::kCorrupt;
  }
}

namespace {

// How a snapshot held only on disk is listed.
SnapshotInfo DiskInfo(const DiskSnapshotInfo& d) {
  SnapshotInfo info;
  info.key = d.key;
  info.tokens = d.tokens;
  info.bytes = d.bytes;
  info.pinned = d.pinned;
  info.tier = CacheTier::kDisk;
  info.expires = d.expires;
  return info;
}

}  // namespace

SnapshotStore::SnapshotStore(const ModelConfig& config, SnapshotStoreOptions options,
                             std::unique_ptr<SnapshotDiskTier> disk)
    : kv_dim_(config.kv_dim()),
      kv_dtype_(config.kv_dtype),
      block_bytes_(kCacheBlockTokens * (2 * config.kv_dim() * KvDtypeBytes(config.kv_dtype) +
                                        int64_t{sizeof(int32_t)})),
      options_(std::move(options)),
      disk_(std::move(disk)) {}

void SnapshotStore::ReportDiscarded(const std::vector<DiscardedSnapshot>& discarded) {
  absl::MutexLock lock(&mu_);
  for (const DiscardedSnapshot& d : discarded) {
    RememberRemovalLocked(d.key, CacheMissOfFileError(d.reason));
    ++stats_.discarded;
  }
}

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

SnapshotFile SnapshotStore::ToFileLocked(const Snapshot& s) const {
  SnapshotFile file;
  file.chain = s.chain;
  file.pinned = s.pinned;
  file.expires = s.expires;
  const int64_t n = static_cast<int64_t>(s.chain.size()) * kCacheBlockTokens;
  file.state.position = n;
  file.state.self_states = s.self_states;
  file.state.shared_k = KvRows::SharedKeys(kv_dtype_, kv_dim_);
  file.state.shared_v = KvRows::SharedValues(kv_dtype_, kv_dim_);
  file.state.shared_k.Reserve(n);
  file.state.shared_v.Reserve(n);
  file.tokens.reserve(n);
  for (const BlockKey& bk : s.chain) {
    const KvBlock& block = blocks_.at(bk);
    file.tokens.insert(file.tokens.end(), block.tokens.begin(), block.tokens.end());
    file.state.shared_k.AppendRows(block.k, 0, kCacheBlockTokens);
    file.state.shared_v.AppendRows(block.v, 0, kCacheBlockTokens);
  }
  return file;
}

absl::Status SnapshotStore::PutOnDiskLocked(const Snapshot& s, bool durable) {
  // The manifest, with rows read from the memory blocks only for blocks the disk lacks: an
  // intermediate snapshot of a long document costs its new blocks, not a copy of the prefix.
  SnapshotManifest manifest;
  manifest.chain = s.chain;
  manifest.self_states = s.self_states;
  manifest.pinned = s.pinned;
  manifest.expires = s.expires;
  manifest.first_block = blocks_.at(s.chain.front()).tokens;
  // Called by Put, within this call: mu_ is held (the analysis does not follow lambdas).
  auto rows = [&](size_t i) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const KvBlock& block = blocks_.at(s.chain[i]);
    return KvBlockRowsOf(block.tokens, block.k, block.v, 0);
  };
  std::vector<BlockKey> evicted;
  const absl::Status written = disk_->Put(manifest, rows, &evicted, durable).status();
  if (!written.ok()) ++stats_.disk_write_failures;
  for (const BlockKey& key : evicted) {
    if (snapshots_.count(key)) continue;  // still in memory
    RememberRemovalLocked(key, CacheMiss::kEvicted);
    ++stats_.evictions;
  }
  ++generation_;
  return written;
}

void SnapshotStore::RememberRemovalLocked(const BlockKey& key, CacheMiss reason) {
  const uint64_t number = ++removals_;
  removed_[key] = Removal{reason, number};
  removed_order_.emplace_back(key, number);
  while (removed_order_.size() > options_.remembered_removals) {
    const auto& [oldest, oldest_number] = removed_order_.front();
    auto it = removed_.find(oldest);
    if (it != removed_.end() && it->second.number == oldest_number) removed_.erase(it);
    removed_order_.pop_front();
  }
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
  if (reason != CacheMiss::kHit) {
    RememberRemovalLocked(it->first, reason);
    (reason == CacheMiss::kExpired ? stats_.expirations : stats_.evictions)++;
  }
  snapshots_.erase(it);
  ++generation_;
}

void SnapshotStore::ExpireLocked() {
  const absl::Time now = options_.now();
  for (auto it = snapshots_.begin(); it != snapshots_.end();) {
    auto next = std::next(it);
    if (it->second.expires <= now) {
      if (disk_) disk_->Remove(it->first);
      RemoveLocked(it, CacheMiss::kExpired);
    }
    it = next;
  }
  if (disk_) {
    for (const BlockKey& key : disk_->Expire(now)) {
      RememberRemovalLocked(key, CacheMiss::kExpired);
      ++stats_.expirations;
      ++generation_;
    }
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
    // Spill to disk when there is one; a snapshot already there stays there.
    bool on_disk = disk_ && disk_->Contains(victim->first);
    if (disk_ && !on_disk) on_disk = PutOnDiskLocked(victim->second, /*durable=*/false).ok();
    if (on_disk) ++stats_.spills;
    RemoveLocked(victim, on_disk ? CacheMiss::kHit : CacheMiss::kEvicted);
  }
}

absl::StatusOr<std::map<BlockKey, SnapshotStore::Snapshot>::iterator> SnapshotStore::InsertLocked(
    absl::Span<const BlockKey> keys, absl::Span<const int32_t> tokens, const SequenceState& state,
    bool pinned, absl::Time expires) {
  Snapshot s;
  s.chain.assign(keys.begin(), keys.end());
  s.self_states = state.self_states;
  s.pinned = pinned;
  s.expires = expires;
  s.last_use = ++use_clock_;
  for (const auto& layer : s.self_states) stats_.bytes += layer.size() * sizeof(float);
  for (size_t b = 0; b < keys.size(); ++b) {
    KvBlock& block = blocks_[keys[b]];
    if (block.refs++ > 0) continue;
    const int64_t row0 = static_cast<int64_t>(b) * kCacheBlockTokens;
    block.tokens.assign(tokens.begin() + row0, tokens.begin() + row0 + kCacheBlockTokens);
    block.k = KvRows::SharedKeys(kv_dtype_, kv_dim_);
    block.v = KvRows::SharedValues(kv_dtype_, kv_dim_);
    block.k.AppendRows(state.shared_k, row0, kCacheBlockTokens);
    block.v.AppendRows(state.shared_v, row0, kCacheBlockTokens);
    stats_.bytes += block_bytes_;
  }
  auto it = snapshots_.emplace(keys.back(), std::move(s)).first;
  removed_.erase(keys.back());  // its queue entry no longer matches anything
  ++generation_;
  EnforceBudgetLocked(keys.back());
  if (stats_.bytes > options_.budget_bytes) {
    RemoveLocked(it, CacheMiss::kEvicted);
    return absl::ResourceExhaustedError(
        absl::StrCat("the snapshot does not fit the cache budget of ", options_.budget_bytes,
                     " bytes next to the pinned snapshots"));
  }
  return it;
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Insert(absl::Span<const BlockKey> keys,
                                                   absl::Span<const int32_t> tokens,
                                                   const SequenceState& state,
                                                   const SnapshotRetention& retention) {
  const absl::Time expires = retention.ttl == absl::InfiniteDuration()
                                 ? absl::InfiniteFuture()
                                 : options_.now() + std::max(retention.ttl, absl::ZeroDuration());
  return Save(keys, tokens, state, retention.pinned, expires);
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Import(const SnapshotFile& file) {
  return Save(file.chain, file.tokens, file.state, file.pinned, file.expires);
}

absl::StatusOr<SnapshotFile> SnapshotStore::Export(const BlockKey& key) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = snapshots_.find(key);
  if (it != snapshots_.end()) return ToFileLocked(it->second);
  if (disk_ && disk_->Contains(key)) return disk_->Load(key);
  return absl::NotFoundError(absl::StrCat("no snapshot ", key.Hex()));
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Save(absl::Span<const BlockKey> keys,
                                                 absl::Span<const int32_t> tokens,
                                                 const SequenceState& state, bool pinned,
                                                 absl::Time expires) {
  const int64_t n = static_cast<int64_t>(keys.size()) * kCacheBlockTokens;
  if (keys.empty() || state.position != n || static_cast<int64_t>(tokens.size()) < n ||
      state.shared_k.rows() < n || state.shared_k.dtype() != kv_dtype_ ||
      state.shared_k.width() != kv_dim_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a snapshot must sit on a block boundary: ", keys.size(), " blocks, state at ",
                     state.position, ", ", tokens.size(), " tokens"));
  }
  // Pre-cached documents (pinned or with a TTL) are written through to disk.
  const bool write_through = pinned || expires != absl::InfiniteFuture();
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = snapshots_.find(keys.back());
  if (it != snapshots_.end()) {
    Snapshot& s = it->second;
    s.pinned |= pinned;
    // A later TTL extends an earlier one; a save without one (a prompt that reached the same
    // block) leaves it.
    if (expires != absl::InfiniteFuture()) s.expires = std::max(s.expires, expires);
    s.last_use = ++use_clock_;
    ++generation_;
  } else {
    absl::StatusOr<std::map<BlockKey, Snapshot>::iterator> inserted =
        InsertLocked(keys, tokens, state, pinned, expires);
    if (!inserted.ok()) {
      // Memory is full of pinned snapshots: the disk tier may still hold it.
      return disk_ ? SaveOnDiskOnlyLocked(keys, tokens, state, pinned, expires, inserted.status())
                   : inserted.status();
    }
    it = *inserted;
  }
  absl::Status written;
  if (disk_ && write_through) written = PutOnDiskLocked(it->second, /*durable=*/true);
  SnapshotInfo info = InfoLocked(it->first, it->second);
  // The memory copy serves either way; the caller is told it will not survive a restart.
  if (!written.ok()) info.disk_error = std::string(written.message());
  return info;
}

absl::StatusOr<SnapshotInfo> SnapshotStore::SaveOnDiskOnlyLocked(absl::Span<const BlockKey> keys,
                                                                 absl::Span<const int32_t> tokens,
                                                                 const SequenceState& state,
                                                                 bool pinned, absl::Time expires,
                                                                 const absl::Status& memory_error) {
  // Rows straight from `state`, and only for blocks the disk lacks: when memory is full of a
  // long document, each later snapshot of it lands here, and copying the whole prefix for each
  // made pre-caching quadratic again.
  SnapshotManifest manifest;
  manifest.chain.assign(keys.begin(), keys.end());
  manifest.first_block.assign(tokens.begin(), tokens.begin() + kCacheBlockTokens);
  manifest.self_states = state.self_states;
  manifest.pinned = pinned;
  manifest.expires = expires;
  auto rows = [&](size_t i) {
    return KvBlockRowsOf(tokens, state.shared_k, state.shared_v,
                         static_cast<int64_t>(i) * kCacheBlockTokens);
  };
  std::vector<BlockKey> evicted;
  absl::StatusOr<DiskSnapshotInfo> written =
      disk_->Put(manifest, rows, &evicted, /*durable=*/pinned || expires != absl::InfiniteFuture());
  if (!written.ok()) {
    ++stats_.disk_write_failures;
    return memory_error;
  }
  for (const BlockKey& key : evicted) {
    if (snapshots_.count(key)) continue;
    RememberRemovalLocked(key, CacheMiss::kEvicted);
    ++stats_.evictions;
  }
  removed_.erase(keys.back());
  ++generation_;
  return DiskInfo(*written);
}

SnapshotHit SnapshotStore::Lookup(absl::Span<const BlockKey> keys,
                                  absl::Span<const int32_t> tokens) {
  SnapshotHit hit;
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  ++stats_.lookups;
  auto same_tokens = [&](const std::vector<int32_t>& stored) {
    return std::equal(stored.begin(), stored.end(), tokens.begin());
  };
  for (size_t j = std::min(keys.size(), tokens.size() / kCacheBlockTokens); j > 0; --j) {
    const int64_t n = static_cast<int64_t>(j) * kCacheBlockTokens;
    auto it = snapshots_.find(keys[j - 1]);
    if (it != snapshots_.end() && it->second.chain.size() == j) {
      Snapshot& s = it->second;
      // The key covers the tokens; comparing them as well makes a hash collision harmless.
      // (Each block is looked up once: a 1M-token document is 7812 of them.)
      std::vector<const KvBlock*> chain;
      chain.reserve(j);
      bool same = true;
      for (size_t b = 0; same && b < j; ++b) {
        chain.push_back(&blocks_.at(s.chain[b]));
        same = std::equal(chain.back()->tokens.begin(), chain.back()->tokens.end(),
                          tokens.begin() + b * kCacheBlockTokens);
      }
      if (same) {
        hit.state.position = n;
        hit.state.self_states = s.self_states;
        hit.state.shared_k = KvRows::SharedKeys(kv_dtype_, kv_dim_);
        hit.state.shared_v = KvRows::SharedValues(kv_dtype_, kv_dim_);
        hit.state.shared_k.Reserve(n);
        hit.state.shared_v.Reserve(n);
        for (const KvBlock* block : chain) {
          hit.state.shared_k.AppendRows(block->k, 0, kCacheBlockTokens);
          hit.state.shared_v.AppendRows(block->v, 0, kCacheBlockTokens);
        }
        hit.tier = CacheTier::kMemory;
        s.last_use = ++use_clock_;
        ++s.hits;
        stats_.hit_tokens_memory += n;
      }
    } else if (disk_ && disk_->Contains(keys[j - 1])) {
      absl::StatusOr<SnapshotFile> file = disk_->Load(keys[j - 1]);
      if (!file.ok()) {
        RememberRemovalLocked(keys[j - 1], CacheMissOfFileError(file.status()));
        ++stats_.discarded;
        ++generation_;
        continue;
      }
      if (file->chain.size() != j || !same_tokens(file->tokens)) continue;
      // Back into memory (best effort), so the next hit is a memory hit.
      InsertLocked(file->chain, file->tokens, file->state, file->pinned, file->expires)
          .IgnoreError();
      hit.state = std::move(file->state);
      hit.tier = CacheTier::kDisk;
      stats_.hit_tokens_disk += n;
    }
    if (hit.tier != CacheTier::kNone) {
      hit.tokens = n;
      hit.key = keys[j - 1];
      hit.miss = CacheMiss::kHit;
      ++stats_.hits;
      return hit;
    }
  }
  hit.miss = CacheMiss::kNoSnapshot;
  for (size_t j = keys.size(); j > 0; --j) {
    auto it = removed_.find(keys[j - 1]);
    if (it != removed_.end()) {
      hit.miss = it->second.reason;
      break;
    }
  }
  return hit;
}

bool SnapshotStore::MadeUnderLocked(const Snapshot& s, const std::optional<BlockKey>& root) const {
  if (!root.has_value()) return true;
  const BlockKey& first = s.chain.front();
  return NextBlockKey(*root, blocks_.at(first).tokens) == first;
}

namespace {

bool DiskMadeUnder(const DiskSnapshotInfo& d, const std::optional<BlockKey>& root) {
  return !root.has_value() || NextBlockKey(*root, d.first_block) == d.first_key;
}

}  // namespace

std::vector<SnapshotInfo> SnapshotStore::List(const std::optional<BlockKey>& root) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  std::vector<SnapshotInfo> out;
  for (const auto& [key, s] : snapshots_) {
    if (MadeUnderLocked(s, root)) out.push_back(InfoLocked(key, s));
  }
  if (disk_) {
    for (const DiskSnapshotInfo& d : disk_->List()) {
      if (!snapshots_.count(d.key) && DiskMadeUnder(d, root)) out.push_back(DiskInfo(d));
    }
  }
  return out;
}

bool SnapshotStore::Evict(const BlockKey& key, const std::optional<BlockKey>& root) {
  absl::MutexLock lock(&mu_);
  auto it = snapshots_.find(key);
  if (root.has_value()) {  // another salt's snapshot is not there for this caller
    bool owned = it != snapshots_.end() && MadeUnderLocked(it->second, root);
    if (it == snapshots_.end() && disk_) {
      for (const DiskSnapshotInfo& d : disk_->List()) {
        if (d.key == key) owned = DiskMadeUnder(d, root);
      }
    }
    if (!owned) return false;
  }
  bool found = disk_ && disk_->Remove(key);
  if (it != snapshots_.end()) {
    RemoveLocked(it, CacheMiss::kEvicted);
  } else if (found) {
    RememberRemovalLocked(key, CacheMiss::kEvicted);
    ++stats_.evictions;
    ++generation_;
  }
  return found || it != snapshots_.end();
}

size_t SnapshotStore::EvictAll(const std::optional<BlockKey>& root) {
  absl::MutexLock lock(&mu_);
  std::set<BlockKey> keys;
  for (const auto& [key, s] : snapshots_) {
    if (MadeUnderLocked(s, root)) keys.insert(key);
  }
  if (disk_) {
    for (const DiskSnapshotInfo& d : disk_->List()) {
      if (DiskMadeUnder(d, root)) keys.insert(d.key);
    }
  }
  for (const BlockKey& key : keys) {
    if (disk_) disk_->Remove(key);
    if (auto it = snapshots_.find(key); it != snapshots_.end()) {
      RemoveLocked(it, CacheMiss::kEvicted);
    }
    RememberRemovalLocked(key, CacheMiss::kEvicted);
  }
  ++generation_;
  return keys.size();
}

CacheMiss SnapshotStore::WhyGone(const BlockKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = removed_.find(key);
  return it == removed_.end() ? CacheMiss::kNoSnapshot : it->second.reason;
}

uint64_t SnapshotStore::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

SnapshotStoreStats SnapshotStore::stats() const {
  absl::MutexLock lock(&mu_);
  SnapshotStoreStats s = stats_;
  s.snapshots = static_cast<int64_t>(snapshots_.size());
  if (disk_) {
    s.disk_bytes = disk_->bytes();
    s.disk_snapshots = static_cast<int64_t>(disk_->size());
  }
  return s;
}

}  // namespace yoco
