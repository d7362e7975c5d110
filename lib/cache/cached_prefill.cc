// Lookup, grid prefill, snapshot saves.
#include "lib/cache/cached_prefill.h"

#include "lib/status/status_macros.h"

namespace yoco {

absl::StatusOr<CachedPrefillResult> CachedPrefill(Backend& backend, SnapshotStore* store,
                                                  const CachedPrefillRequest& request) {
  const absl::Span<const int32_t> prompt = request.prompt;
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::vector<BlockKey> computed;
  if (store != nullptr && request.block_keys == nullptr) {
    computed = PrefixBlockKeys(backend.model().fingerprint(), request.salt, prompt);
  }
  const std::vector<BlockKey>& keys =
      store != nullptr && request.block_keys != nullptr ? *request.block_keys : computed;
  // At least the last prompt token must run: its logits give the first new token.
  const int64_t usable_blocks = n > 0 ? (n - 1) / kCacheBlockTokens : 0;
  SnapshotHit hit;
  if (store != nullptr && usable_blocks > 0) {
    hit = store->Lookup(absl::MakeConstSpan(keys).subspan(0, usable_blocks), prompt);
  }
  const int64_t last_block = static_cast<int64_t>(keys.size());
  std::optional<SnapshotInfo> last_block_snapshot;
  const SnapshotPolicy& policy = request.policy;
  // A prompt whose last full block was restored from a snapshot saves nothing new there; the
  // existing snapshot still gets the requested retention. (Before the prefill takes the state.)
  if (store != nullptr && policy.enabled && policy.at_last_block && last_block > 0 &&
      hit.tokens == last_block * kCacheBlockTokens) {
    auto refreshed = store->Insert(keys, prompt, hit.state, policy.last_block_retention);
    if (refreshed.ok()) last_block_snapshot = *refreshed;
  }
  PrefillOptions options;
  options.grid = kCacheBlockTokens;
  options.start = hit.tokens > 0 ? &hit.state : nullptr;  // moved into the generation
  options.cancelled = request.cancelled;
  options.progress = request.progress;
  options.generated_tail = request.generated_tail;
  options.constraint = request.constraint;
  const bool snapshots = store != nullptr && policy.enabled;
  if (snapshots || request.on_block) {
    options.on_boundary = [&](const SequenceState& state) {
      const int64_t blocks = state.position / kCacheBlockTokens;
      const bool is_last = policy.at_last_block && blocks == last_block;
      const bool periodic = policy.every_blocks > 0 && blocks % policy.every_blocks == 0;
      if (snapshots && (is_last || periodic)) {
        // Best effort: a snapshot that does not fit the budget is simply not kept.
        auto saved = store->Insert(absl::MakeConstSpan(keys).subspan(0, blocks), prompt, state,
                                   is_last ? policy.last_block_retention : SnapshotRetention{});
        if (saved.ok() && is_last) last_block_snapshot = *saved;
      }
      if (request.on_block) request.on_block(state);
    };
  }
  int32_t first_token = -1;
  ASSIGN_OR_RETURN(Generation gen,
                   Generation::Prefill(backend, prompt, request.sampling, &first_token, options));
  CachedPrefillResult result{std::move(gen), first_token, hit.tokens,
                             hit.tier,       hit.miss,    std::move(last_block_snapshot)};
  return result;
}

}  // namespace yoco
