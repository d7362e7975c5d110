// WorkerPool: what one Generate request needs from the router, and all it may touch — the
// router's settings, a worker pair per attempt, the workers' stubs, failure marks, the prompt's
// cache keys, snapshot copies, the load wait queue, the stall watch and the metrics.
// RouterService implements it; GenerateStream sees nothing else of the router.
#ifndef YOCO_SERVICES_ROUTER_WORKER_POOL_H_
#define YOCO_SERVICES_ROUTER_WORKER_POOL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/auth/tenant_directory.h"
#include "lib/auth/tenant_usage.h"
#include "lib/cache/block_key.h"
#include "lib/model/model_config.h"
#include "lib/routing/load_wait_queue.h"
#include "lib/routing/stall_watch.h"
#include "lib/routing/worker_registry.h"
#include "lib/text/tokenizer.h"
#include "services/router/failover.h"
#include "services/router/router_metrics.h"
#include "services/router/router_options.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

// Who a call is from and the cache salt its work uses.
struct CallScope {
  std::string tenant;  // empty without --tenants
  std::string salt;
  TenantScheduling scheduling;                   // the tenant's (the default without --tenants)
  prometheus::Counter* prompt_tokens = nullptr;  // the tenant's counters, if any
  prometheus::Counter* generated_tokens = nullptr;
};

// What an attempt asks of the pool.
struct PairRequest {
  absl::Span<const BlockKey> keys;  // the input's usable block keys (UsableKeys)
  size_t input_tokens = 0;          // the prompt plus the tokens already sent
  std::vector<size_t> skip_prefill, skip_decode;
  bool allow_local = true;  // the decode worker may prefill (RouterOptions::local_prefill_*)
  // Nonzero: only workers of this model version (the request has streamed tokens of it; its
  // continuation must come from the same weights). Zero: any version both roles run.
  uint64_t version = 0;
};

struct WorkerPair {
  std::optional<WorkerChoice> prefill;  // none when no prefill worker is healthy
  std::optional<WorkerChoice> decode;
  bool local = false;  // the decode worker prefills: `prefill` is not used
  bool usable() const { return decode.has_value() && (local || prefill.has_value()); }
  // The model version the pair runs (the decode worker's fingerprint; 0 without one).
  uint64_t version() const { return decode.has_value() ? decode->info.model_fingerprint() : 0; }
};

class WorkerPool {
 public:
  virtual ~WorkerPool() = default;

  virtual const RouterOptions& options() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual RouterMetrics& metrics() = 0;  // never null

  // Without --tenants: the request's own salt. With them: the caller's tenant's salt;
  // UNAUTHENTICATED for a caller who is no tenant, INVALID_ARGUMENT for a request that names a
  // salt itself (it could otherwise reach another tenant's snapshots).
  virtual absl::StatusOr<CallScope> Scope(const grpc::ServerContextBase& context, bool has_salt,
                                          const std::string& request_salt) = 0;
  // Admits a request of the scope's tenant under its limits (nothing to admit without
  // --tenants: null): the lease is held while the request runs and charged its generated
  // tokens. RESOURCE_EXHAUSTED naming the limit otherwise (TenantUsage::RetryAfter says when).
  virtual absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> AdmitTenant(
      const CallScope& scope, uint64_t prompt_tokens) = 0;
  // The block keys of `tokens` a prefill can resume from (all but the last token's block).
  virtual std::vector<BlockKey> UsableKeys(const std::string& salt,
                                           const std::vector<int32_t>& tokens) const = 0;
  // The most K/V rows one sequence can hold on the largest decode worker; 0: unknown.
  virtual uint64_t LongestSequenceRows() const = 0;

  // The least-loaded pair for `request`, weighing cached prefixes against load.
  virtual WorkerPair ChoosePair(const PairRequest& request) = 0;
  virtual v1::PrefillWorker::StubInterface& PrefillStub(size_t index) = 0;
  virtual v1::DecodeWorker::StubInterface& DecodeStub(size_t index) = 0;
  // Counts a request on a worker while the handle lives (the pair choice weighs it).
  virtual std::unique_ptr<WorkerRegistry::InFlight> CountRequest(WorkerRole role, size_t index) = 0;
  // A call to the worker failed: unhealthy until its probe answers again (and counted).
  virtual void MarkFailed(WorkerRole role, size_t index) = 0;
  // The worker's address, as the router reaches it (for the access log).
  virtual std::string WorkerAddress(WorkerRole role, size_t index) const = 0;

  // The decode worker now holds the prefix ending in `key` (a lean bundle reached it).
  virtual void NoteHeld(size_t decode_index, const BlockKey& key) = 0;
  // Why the longest of `keys` is held by no prefill worker any more, if the index saw it go.
  virtual std::optional<ForgottenReason> WhyForgotten(absl::Span<const BlockKey> keys) const = 0;
  // Queues a copy of the prompt's longest snapshot to the worker chosen instead of its holder.
  virtual void CopySnapshotLater(const WorkerChoice& choice, const std::vector<BlockKey>& keys) = 0;
  // Queues the snapshot of `tokens` (prompt + generated) on a prefill worker.
  // It waits there behind every request (background priority), as the request's tenant.
  virtual void SnapshotConversation(size_t prefill_index, size_t prompt_tokens,
                                    std::vector<int32_t> tokens, const std::string& salt,
                                    const v1::Scheduling& scheduling) = 0;

  virtual LoadWaitQueue& load_queue() = 0;
  virtual StallWatch& stall_watch() = 0;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_WORKER_POOL_H_
