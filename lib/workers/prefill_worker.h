// PrefillWorker: the prefill side of disaggregated serving, without RPC. Prefills a prompt
// (self-decoder over all of it, cross-decoder for its last position), samples the first token,
// and ships the resulting state bundle to a decode worker over UcxTransport. With a prefix
// cache, the prefill starts from the longest snapshot of the prompt it holds and leaves new
// snapshots behind (see lib/cache).
#ifndef YOCO_LIB_WORKERS_PREFILL_WORKER_H_
#define YOCO_LIB_WORKERS_PREFILL_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/cache/cached_prefill.h"
#include "lib/cache/snapshot_store.h"
#include "lib/engine/backend.h"
#include "lib/engine/sampler.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

struct PrefillWorkerOptions {
  int64_t cache_budget_bytes = 0;  // prefix-cache memory; 0: no cache
  int snapshot_every_blocks = 16;  // SnapshotPolicy::every_blocks
};

struct PrefillCall {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  std::string cache_salt;
  std::string decode_address;  // UcxTransport address of the decode worker
  absl::Duration transfer_timeout = absl::Seconds(30);
  std::function<bool()> cancelled;
};

struct PrefillResult {
  int32_t first_token = -1;
  uint64_t transfer_id = 0;  // the UCX transfer that carried the bundle
  uint64_t sender = 0;       // this worker's transport id (IncomingTransfer::sender)
  uint64_t bundle_bytes = 0;
  double prefill_ms = 0;
  double transfer_ms = 0;
  int64_t cached_tokens = 0;
  CacheTier cache_tier = CacheTier::kNone;
  CacheMiss cache_miss = CacheMiss::kNoSnapshot;
};

struct PrecacheResult {
  int64_t tokens = 0;  // the document's
  SnapshotInfo snapshot;
};

class PrefillWorker {
 public:
  // `backend` runs prefills one at a time; `transport` sends (it needs no receive callbacks);
  // `disk` (optional) is the prefix cache's disk tier.
  PrefillWorker(std::unique_ptr<Backend> backend, std::unique_ptr<UcxTransport> transport,
                const PrefillWorkerOptions& options = {},
                std::unique_ptr<SnapshotDiskTier> disk = nullptr);

  // Prefills the prompt and delivers the bundle to the decode worker. Returns once the decode
  // worker has verified and taken the bundle. INVALID_ARGUMENT for a bad prompt or sampling;
  // CANCELLED; UNAVAILABLE / DEADLINE_EXCEEDED / the receiver's refusal from the transfer.
  absl::StatusOr<PrefillResult> Prefill(const PrefillCall& call);

  // Prefills a document and keeps a snapshot at its last block boundary with `retention`.
  // FAILED_PRECONDITION without a cache; INVALID_ARGUMENT for a document shorter than a block;
  // RESOURCE_EXHAUSTED when pinned snapshots leave no room.
  absl::StatusOr<PrecacheResult> Precache(const std::vector<int32_t>& document,
                                          const std::string& cache_salt,
                                          const SnapshotRetention& retention,
                                          const std::function<bool()>& cancelled);

  const Model& model() const { return backend_->model(); }
  UcxTransport& transport() { return *transport_; }
  SnapshotStore* cache() { return cache_.get(); }  // null without a cache

 private:
  SnapshotPolicy Policy() const;

  const PrefillWorkerOptions options_;
  std::mutex mu_;  // one prefill at a time on the backend
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<UcxTransport> transport_;
  std::unique_ptr<SnapshotStore> cache_;
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_PREFILL_WORKER_H_
