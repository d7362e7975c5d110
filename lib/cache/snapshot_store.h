// SnapshotStore: a prefill worker's prefix cache in memory. A snapshot at block boundary p is
// the shared K/V rows [0, p) plus every self-decoder layer's state at p. K/V rows are kept per
// block and shared (reference counted) between snapshots of the same prefix; states are kept
// per snapshot, because a recurrent state cannot be rolled back to an earlier position.
//
// A byte budget bounds K/V blocks + states; when it is exceeded the least recently used
// unpinned snapshots go first, to the disk tier when there is one. Snapshots may be pinned
// (never evicted, except by Evict/EvictAll) and may expire (TTL); pinned or expiring snapshots
// (pre-cached documents) are also written through to disk, so they survive a restart. A lookup
// that finds a snapshot only on disk loads it back into memory. Every change bumps generation(),
// which the router polls to refresh its index. Thread-safe.
#ifndef YOCO_LIB_CACHE_SNAPSHOT_STORE_H_
#define YOCO_LIB_CACHE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "lib/cache/block_key.h"
#include "lib/cache/snapshot_disk_tier.h"
#include "lib/engine/sequence_state.h"
#include "lib/model/model_config.h"

namespace yoco {

enum class CacheTier { kNone, kMemory, kDisk };

// Why a lookup found no snapshot for the prompt.
enum class CacheMiss {
  kHit,                  // not a miss
  kNoSnapshot,           // never cached (or forgotten long ago)
  kEvicted,              // pushed out by the byte budget or an EvictCache call
  kExpired,              // its TTL passed
  kFingerprintMismatch,  // a stored file was made by another model
  kCorrupt,              // a stored file failed its checksum or did not parse
  kUnauthenticated,      // a stored file was not made with this worker's cache key
};

// Why a stored file could not be used, from its error (ParseSnapshotFile's codes).
CacheMiss CacheMissOfFileError(const absl::Status& error);

const char* CacheTierName(CacheTier tier);
const char* CacheMissName(CacheMiss miss);

struct SnapshotStoreOptions {
  int64_t budget_bytes = int64_t{1} << 30;
  // Keys whose removal a later miss can still explain (evicted / expired).
  size_t remembered_removals = 4096;
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

struct SnapshotRetention {
  bool pinned = false;
  absl::Duration ttl = absl::InfiniteDuration();
};

struct SnapshotInfo {
  BlockKey key;        // the boundary block's key: the snapshot's handle
  int64_t tokens = 0;  // prefix length covered
  int64_t bytes = 0;   // K/V rows + states (rows shared with other snapshots counted too)
  bool pinned = false;
  CacheTier tier = CacheTier::kMemory;
  uint64_t hits = 0;
  absl::Time expires = absl::InfiniteFuture();
  // A pre-cached snapshot that should have been written to the disk tier and could not be
  // (full disk, read-only folder): why. It is then held in memory only.
  std::string disk_error;
};

struct SnapshotHit {
  int64_t tokens = 0;   // prompt tokens covered; 0 on a miss
  SequenceState state;  // the state at `tokens` (on a hit)
  BlockKey key;
  CacheTier tier = CacheTier::kNone;
  CacheMiss miss = CacheMiss::kNoSnapshot;
};

struct SnapshotStoreStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t hit_tokens_memory = 0;
  uint64_t hit_tokens_disk = 0;
  uint64_t evictions = 0;            // gone from every tier: budget or explicit
  uint64_t spills = 0;               // moved from memory to disk by the memory budget
  uint64_t expirations = 0;          // TTL
  uint64_t discarded = 0;            // disk files refused: corrupt or another model's
  uint64_t disk_write_failures = 0;  // snapshots the disk tier could not write
  int64_t bytes = 0;                 // memory
  int64_t snapshots = 0;             // memory
  int64_t disk_bytes = 0;
  int64_t disk_snapshots = 0;
};

class SnapshotStore {
 public:
  // `disk` may be null (memory only).
  SnapshotStore(const ModelConfig& config, SnapshotStoreOptions options,
                std::unique_ptr<SnapshotDiskTier> disk = nullptr);

  // Files the disk tier refused when it opened: later misses on them say why.
  void ReportDiscarded(const std::vector<DiscardedSnapshot>& discarded);

  // Saves `state` as the snapshot of the prefix whose block keys are `keys`: REQUIRES
  // state.position == keys.size() * kCacheBlockTokens <= tokens.size(). Saving an existing
  // snapshot refreshes it and merges the retention (pinned wins; a TTL extends an existing
  // expiry to the later one, no TTL leaves it).
  // With a disk tier, a snapshot memory cannot take goes to disk only (info.tier kDisk).
  // RESOURCE_EXHAUSTED when it does not fit the budget even after evicting every unpinned
  // snapshot (those evictions stand).
  absl::StatusOr<SnapshotInfo> Insert(absl::Span<const BlockKey> keys,
                                      absl::Span<const int32_t> tokens, const SequenceState& state,
                                      const SnapshotRetention& retention);

  // A snapshot copied from another worker (SnapshotFile as Export gives it), with its
  // retention.
  absl::StatusOr<SnapshotInfo> Import(const SnapshotFile& file);
  // A snapshot, from memory or disk, as a self-contained file for copying. NOT_FOUND if neither
  // tier holds it.
  absl::StatusOr<SnapshotFile> Export(const BlockKey& key);

  // The longest snapshot of a prefix of the prompt whose block keys are `keys` and tokens
  // `tokens`, restored into a state; on a miss, why.
  SnapshotHit Lookup(absl::Span<const BlockKey> keys, absl::Span<const int32_t> tokens);

  // With `root` (PrefixRootKey of a salt), only the snapshots made under that salt: a tenant
  // sees and evicts its own and nothing else, and a handle of another salt is "not found".
  std::vector<SnapshotInfo> List(const std::optional<BlockKey>& root = std::nullopt);
  bool Evict(const BlockKey& key,
             const std::optional<BlockKey>& root = std::nullopt);  // also a pinned one
  size_t EvictAll(const std::optional<BlockKey>& root = std::nullopt);

  // Why a snapshot no longer held went (kEvicted, kExpired, a refused file's reason), as far as
  // the last `remembered_removals` removals tell; kNoSnapshot when they do not.
  CacheMiss WhyGone(const BlockKey& key) const;

  uint64_t generation() const;
  SnapshotStoreStats stats() const;

 private:
  struct KvBlock {
    std::vector<int32_t> tokens;
    KvRows k, v;  // [kCacheBlockTokens, kv_dim]
    int refs = 0;
  };
  struct Snapshot {
    std::vector<BlockKey> chain;  // keys of blocks 0..n-1
    std::vector<std::vector<float>> self_states;
    bool pinned = false;
    absl::Time expires = absl::InfiniteFuture();
    uint64_t last_use = 0;  // use_clock_ at the last insert or hit
    uint64_t hits = 0;
  };

  absl::StatusOr<SnapshotInfo> Save(absl::Span<const BlockKey> keys,
                                    absl::Span<const int32_t> tokens, const SequenceState& state,
                                    bool pinned, absl::Time expires);
  int64_t SnapshotBytes(const Snapshot& s) const;
  bool MadeUnderLocked(const Snapshot& s, const std::optional<BlockKey>& root) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SnapshotInfo InfoLocked(const BlockKey& key, const Snapshot& s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::map<BlockKey, Snapshot>::iterator> InsertLocked(
      absl::Span<const BlockKey> keys, absl::Span<const int32_t> tokens, const SequenceState& state,
      bool pinned, absl::Time expires) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SnapshotFile ToFileLocked(const Snapshot& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When memory cannot take a snapshot: the disk tier alone, or `memory_error`.
  absl::StatusOr<SnapshotInfo> SaveOnDiskOnlyLocked(absl::Span<const BlockKey> keys,
                                                    absl::Span<const int32_t> tokens,
                                                    const SequenceState& state, bool pinned,
                                                    absl::Time expires,
                                                    const absl::Status& memory_error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes to the disk tier, recording the files its budget pushed out.
  // `durable`: synced before it returns (pre-cached documents); a spilled snapshot is a cache
  // entry that a crash may lose (its files then fail their checks and are dropped at start-up).
  absl::Status PutOnDiskLocked(const Snapshot& s, bool durable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberRemovalLocked(const BlockKey& key, CacheMiss reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a snapshot from memory; with `reason` kHit it moved to disk and is not gone.
  void RemoveLocked(std::map<BlockKey, Snapshot>::iterator it, CacheMiss reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts least recently used unpinned snapshots other than `keep` until within budget.
  void EnforceBudgetLocked(const BlockKey& keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t kv_dim_;
  const KvDtype kv_dtype_;  // how blocks hold K/V: the engine's (config.kv_dtype)
  const int64_t block_bytes_;
  const SnapshotStoreOptions options_;
  const std::unique_ptr<SnapshotDiskTier> disk_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex mu_;
  std::map<BlockKey, KvBlock> blocks_ ABSL_GUARDED_BY(mu_);
  std::map<BlockKey, Snapshot> snapshots_ ABSL_GUARDED_BY(mu_);
  // Why a snapshot went, for miss reasons: the last `remembered_removals` removals. Each entry
  // carries the number of its removal so that an older queue entry of a key removed again
  // does not forget the newer one.
  struct Removal {
    CacheMiss reason;
    uint64_t number;
  };
  std::map<BlockKey, Removal> removed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<BlockKey, uint64_t>> removed_order_ ABSL_GUARDED_BY(mu_);
  uint64_t removals_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  SnapshotStoreStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_SNAPSHOT_STORE_H_
