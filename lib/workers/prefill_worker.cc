// Prefill (through the prefix cache when there is one), then ship.
#include "lib/workers/prefill_worker.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "lib/engine/generation.h"
#include "lib/engine/state_bundle.h"

namespace yoco {

PrefillWorker::PrefillWorker(std::unique_ptr<Backend> backend,
                             std::unique_ptr<UcxTransport> transport,
                             const PrefillWorkerOptions& options,
                             std::unique_ptr<SnapshotDiskTier> disk)
    : options_(options), backend_(std::move(backend)), transport_(std::move(transport)) {
  if (options_.cache_budget_bytes > 0) {
    SnapshotStoreOptions store;
    store.budget_bytes = options_.cache_budget_bytes;
    cache_ = std::make_unique<SnapshotStore>(backend_->model().config(), store, std::move(disk));
  }
}

SnapshotPolicy PrefillWorker::Policy() const {
  SnapshotPolicy policy;
  policy.enabled = cache_ != nullptr;
  policy.every_blocks = options_.snapshot_every_blocks;
  return policy;
}

absl::StatusOr<PrefillResult> PrefillWorker::Prefill(const PrefillCall& call) {
  PrefillResult result;
  auto bytes = std::make_shared<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time start = absl::Now();
    CachedPrefillRequest request;
    request.prompt = call.prompt;
    request.sampling = call.sampling;
    request.salt = call.cache_salt;
    request.policy = Policy();
    request.cancelled = call.cancelled;
    absl::StatusOr<CachedPrefillResult> prefill = CachedPrefill(*backend_, cache_.get(), request);
    if (!prefill.ok()) return prefill.status();
    result.first_token = prefill->first_token;
    result.cached_tokens = prefill->cached_tokens;
    result.cache_tier = prefill->tier;
    result.cache_miss = prefill->miss;
    *bytes = SerializeStateBundle(prefill->generation.ToBundle(backend_->model().fingerprint()));
    result.prefill_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  }
  result.bundle_bytes = bytes->size();
  result.sender = transport_->id();
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto verdict = done->get_future();
  const absl::Time start = absl::Now();
  result.transfer_id =
      transport_->Send(call.decode_address, {bytes->data(), bytes->size(), bytes},
                       call.transfer_timeout, [done](absl::Status st) { done->set_value(st); });
  const absl::Status st = verdict.get();
  result.transfer_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!st.ok()) return st;
  return result;
}

absl::StatusOr<PrecacheResult> PrefillWorker::Precache(const std::vector<int32_t>& document,
                                                       const std::string& cache_salt,
                                                       const SnapshotRetention& retention,
                                                       const std::function<bool()>& cancelled) {
  if (cache_ == nullptr) {
    return absl::FailedPreconditionError("this prefill worker runs without a prefix cache");
  }
  if (static_cast<int64_t>(document.size()) < kCacheBlockTokens) {
    return absl::InvalidArgumentError(absl::StrCat("a document needs at least ", kCacheBlockTokens,
                                                   " tokens to be cached; it has ",
                                                   document.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  CachedPrefillRequest request;
  request.prompt = document;
  request.salt = cache_salt;
  request.policy = Policy();
  request.policy.last_block_retention = retention;
  request.cancelled = cancelled;
  absl::StatusOr<CachedPrefillResult> prefill = CachedPrefill(*backend_, cache_.get(), request);
  if (!prefill.ok()) return prefill.status();
  if (!prefill->last_block_snapshot.has_value()) {
    return absl::ResourceExhaustedError(
        "the document's snapshot does not fit the prefix cache next to the pinned snapshots");
  }
  return PrecacheResult{static_cast<int64_t>(document.size()), *prefill->last_block_snapshot};
}

}  // namespace yoco
