// CachedPrefill: a prefill that starts from the longest cached snapshot of the prompt and saves
// new snapshots at the boundaries the policy asks for, during its one chunked pass. Prefill runs
// on the cache's block grid, so a hit computes bit for bit what a miss computes: same tokens.
#ifndef YOCO_LIB_CACHE_CACHED_PREFILL_H_
#define YOCO_LIB_CACHE_CACHED_PREFILL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/cache/snapshot_store.h"
#include "lib/engine/backend.h"
#include "lib/engine/generation.h"

namespace yoco {

// Where snapshots are saved.
struct SnapshotPolicy {
  bool enabled = true;
  // At the last full block of the prompt (the end of a pre-cached document, or what a
  // follow-up turn shares with this one).
  bool at_last_block = true;
  // And every this many blocks of long prompts (0: never), so prompts that share only the start
  // of a long one still hit.
  int every_blocks = 16;
  // Applies to the last-block snapshot; the others are plain LRU entries.
  SnapshotRetention last_block_retention;
};

struct CachedPrefillRequest {
  absl::Span<const int32_t> prompt;
  SamplingParams sampling;
  std::string salt;  // per-tenant cache salt
  SnapshotPolicy policy;
  std::function<bool()> cancelled;
  std::function<void(int64_t position)> progress;  // PrefillOptions::progress
  // Called with the state at every block boundary the prefill passes (after any snapshot
  // there), e.g. to ship the K/V rows done while the rest is prefilled.
  std::function<void(const SequenceState&)> on_block;
  // The prompt's PrefixBlockKeys under `salt` when the caller has them (not hashed again);
  // null: computed here when there is a store.
  const std::vector<BlockKey>* block_keys = nullptr;
  int64_t generated_tail = 0;                   // PrefillOptions::generated_tail
  const LogitConstraint* constraint = nullptr;  // PrefillOptions::constraint
};

struct CachedPrefillResult {
  Generation generation;
  int32_t first_token = -1;
  int64_t cached_tokens = 0;  // prompt tokens restored from a snapshot
  CacheTier tier = CacheTier::kNone;
  CacheMiss miss = CacheMiss::kNoSnapshot;
  std::optional<SnapshotInfo> last_block_snapshot;  // when the policy saved (or refreshed) one
};

// `store` may be null (no cache: a plain prefill on the grid).
absl::StatusOr<CachedPrefillResult> CachedPrefill(Backend& backend, SnapshotStore* store,
                                                  const CachedPrefillRequest& request);

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_CACHED_PREFILL_H_
