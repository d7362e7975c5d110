// PrefillWorker: the prefill side of disaggregated serving, without RPC. Prefills a prompt
// (self-decoder over all of it, cross-decoder for its last position), samples the first token,
// and ships the resulting state bundle to a decode worker over UcxTransport. With a prefix
// cache, the prefill starts from the longest snapshot of the prompt it holds and leaves new
// snapshots behind (see lib/cache); snapshots can be copied between prefill workers over the
// same transport (a hot document served by more than one worker).
#ifndef YOCO_LIB_WORKERS_PREFILL_WORKER_H_
#define YOCO_LIB_WORKERS_PREFILL_WORKER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/cache/cached_prefill.h"
#include "lib/cache/snapshot_store.h"
#include "lib/engine/backend.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/sampler.h"
#include "lib/engine/warm_buffer_pool.h"
#include "lib/grammar/structured_output.h"
#include "lib/model/token_logprobs.h"
#include "lib/scheduling/scheduling_class.h"
#include "lib/threading/bounded_job_queue.h"
#include "lib/threading/turn_queue.h"
#include "lib/trace/trace_context.h"
#include "lib/transport/ucx_transport.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/part_sender.h"
#include "lib/workers/shipped_chunks.h"

namespace yoco {

struct PrefillWorkerOptions {
  // Structured output's constraints (the vocabulary's token bytes); null: requests that ask
  // for it are refused with FAILED_PRECONDITION.
  std::shared_ptr<const StructuredOutput> structured_output;
  int64_t cache_budget_bytes = 0;  // prefix-cache memory; 0: no cache
  int snapshot_every_blocks = 16;  // SnapshotPolicy::every_blocks
  std::string cache_dir;           // the cache's disk tier (with a cache); empty: none
  int64_t cache_disk_budget_bytes = int64_t{8} << 30;
  // Authenticates snapshot files on disk and snapshot copies between workers (ReadKeyFile);
  // every prefill worker of a cluster needs the same. Empty: integrity checks only.
  std::string cache_key;
  // Prefills and pre-caches waiting for the engine beyond the one running; one more is refused
  // with RESOURCE_EXHAUSTED (the router then tries another worker).
  int max_waiting = 32;
  // Idle memory kept for serialising bundles (WarmBufferPool): a long document's bundle written
  // into fresh memory costs more than its transfer.
  int64_t transfer_buffer_keep_bytes = int64_t{1} << 30;
  // Touches that memory at start, so that the first long bundles do not pay for fresh pages.
  bool prefault = false;
  // A bundle whose K/V rows (after those the decode worker holds) exceed this goes as parts of
  // at most this many bytes ahead of the rest (BundlePart): neither side then needs a buffer of
  // the whole bundle, and serialising, the wire and the decode worker's parsing overlap where
  // there are cores for it. 0: bundles go whole.
  int64_t bundle_part_bytes = kDefaultBundlePartBytes;
};

struct PrefillResult;

struct PrefillCall {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  std::string cache_salt;
  std::string decode_address;  // UcxTransport address of the decode worker
  absl::Duration transfer_timeout = kDefaultTransferWait;
  std::function<bool()> cancelled;
  // Tokens the request may still produce, the first included (0: unknown), and whether EOS
  // ends it. When the first token ends the request no bundle is shipped.
  int max_new_tokens = 0;
  bool stop_at_eos = false;
  // Leading blocks of the prompt the router believes the decode worker holds (it routed their
  // K/V there); the bundle leaves out as many as this or this worker's own record says.
  int64_t decode_resident_blocks = 0;
  SchedulingClass scheduling;  // its place in the engine's queue
  int64_t generated_tail = 0;  // PrefillOptions::generated_tail (a retry's tokens already sent)
  // Choices (SamplingParams' n > 1) whose first token to draw (Generation::DrawChoices) into
  // PrefillResult::choice_first; the bundle is shipped unless every one ends there. Empty: one.
  std::vector<uint32_t> choices;
  // Sent in the bundle transfer's UCX header, for the decode worker's span of its receipt: only
  // when that worker reads it (WorkerInfo.reads_traced_transfers).
  std::optional<TraceContext> transfer_trace;
  // When a bundle will ship: called with the result's first-token fields (the first token, its
  // logprobs, the cache fields, prefill_ms) once the prefill has them and the engine is free,
  // before the bundle goes, so that the caller can stream the token while a long bundle is
  // still on its way.
  std::function<void(const PrefillResult&)> on_first_token;
};

// The payload of a Prefill error whose cause is the decode worker: the state bundle could not
// reach it (unreachable, or it did not take the bundle in time).
inline constexpr char kDecodePeerFailedPayload[] = "type.yoco.dev/decode-peer-failed";

struct PrefillResult {
  int32_t first_token = -1;
  std::optional<TokenLogprobs> first_logprobs;  // when the sampling asks for them
  std::vector<ChoiceDraw> choice_first;         // for PrefillCall::choices, in their order
  bool shipped = false;       // false: the first token ended the request; nothing was sent
  uint64_t transfer_id = 0;   // the UCX transfer that carried the bundle
  uint64_t sender = 0;        // this worker's transport id (IncomingTransfer::sender)
  uint64_t bundle_bytes = 0;  // sent for the bundle the decode worker took, parts included
  int32_t bundle_parts = 0;   // parts its K/V went ahead in (0: the bundle went whole)
  int32_t early_parts = 0;    // of those, sent while the prompt was still being prefilled
  // K/V chunks the bundle left out because the decode worker holds them (ResidentKv).
  int64_t resident_chunks = 0;
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

struct SnapshotCopyResult {
  uint64_t bytes = 0;
  double copy_ms = 0;
};

class PrefillWorker {
 public:
  // `backend` runs prefills one at a time; the worker's transport sends bundles and sends and
  // receives snapshot copies. Opens the cache's disk tier, if any (see discarded_at_start()).
  static absl::StatusOr<std::unique_ptr<PrefillWorker>> Create(
      std::unique_ptr<Backend> backend, const UcxTransportOptions& transport,
      const PrefillWorkerOptions& options = {});

  // Prefills the prompt and delivers the bundle to the decode worker. Returns once the decode
  // worker has verified and taken the bundle. INVALID_ARGUMENT for a bad prompt or sampling;
  // CANCELLED; UNAVAILABLE / DEADLINE_EXCEEDED / the receiver's refusal from the transfer.
  absl::StatusOr<PrefillResult> Prefill(const PrefillCall& call);

  // Prefills a document and keeps a snapshot at its last block boundary with `retention`.
  // FAILED_PRECONDITION without a cache; INVALID_ARGUMENT for a document shorter than a block;
  // RESOURCE_EXHAUSTED when pinned snapshots leave no room. `progress` (may be null) gets the
  // document's tokens processed so far after every 128-token segment, a restored prefix
  // included.
  absl::StatusOr<PrecacheResult> Precache(
      const std::vector<int32_t>& document, const std::string& cache_salt,
      const SnapshotRetention& retention, const std::function<bool()>& cancelled,
      const std::function<void(int64_t tokens_done)>& progress = nullptr,
      const SchedulingClass& scheduling = {});

  // Every token's logprobs given those before it (ScorePrompt), on the engine in its turn.
  // INVALID_ARGUMENT for a bad prompt; CANCELLED.
  absl::StatusOr<std::vector<TokenLogprobs>> Score(const std::vector<int32_t>& tokens,
                                                   int top_logprobs,
                                                   const std::function<bool()>& cancelled,
                                                   const SchedulingClass& scheduling = {});

  // Sends the snapshot `key` (from memory or disk) to the prefill worker whose transport
  // address is `target_address`; returns once that worker has verified and kept it.
  // FAILED_PRECONDITION without a cache, NOT_FOUND for an unknown snapshot, the transfer's or
  // the receiver's error otherwise.
  absl::StatusOr<SnapshotCopyResult> CopySnapshot(const BlockKey& key,
                                                  const std::string& target_address,
                                                  absl::Duration timeout);

  const Model& model() const { return backend_->model(); }
  // VocabularyFingerprint of the structured-output vocabulary; 0 without one.
  uint64_t vocabulary_fingerprint() const {
    return options_.structured_output ? options_.structured_output->vocabulary_fingerprint() : 0;
  }
  UcxTransport& transport() { return *transport_; }
  SnapshotStore* cache() { return cache_.get(); }  // null without a cache
  // Whether a prefill or pre-cache is running on the backend now (others wait for it).
  bool engine_busy() const { return engine_.busy(); }
  size_t engine_waiting() const { return engine_.waiting(); }
  // Whether the next prefill would be refused (readiness: this worker cannot admit).
  bool engine_queue_full() const { return engine_.full(); }
  uint64_t engine_refused() const { return engine_.refused(); }
  // Times a pre-cache or prefill handed the engine to a higher priority between its blocks.
  uint64_t engine_yields() const { return engine_.yields(); }
  WarmBufferPoolStats bundle_buffer_stats() const { return bundle_buffers_.stats(); }
  // Snapshot files the disk tier refused (and deleted) when it opened.
  const std::vector<DiscardedSnapshot>& discarded_at_start() const { return discarded_; }

 private:
  explicit PrefillWorker(const PrefillWorkerOptions& options)
      : options_(options),
        engine_(static_cast<size_t>(std::max(options.max_waiting, 0))),
        bundle_buffers_(
            static_cast<size_t>(std::max<int64_t>(options.transfer_buffer_keep_bytes, 0))) {}
  SnapshotPolicy Policy() const;
  // Sends bytes over the transport (with `trace` in its header) and waits for the receiver's
  // verdict.
  absl::Status SendAndWait(const std::string& address, SendBuffer buffer, absl::Duration timeout,
                           uint64_t* transfer_id, std::optional<TraceContext> trace = std::nullopt);
  // Parts for the call's rows past the resident chunks when they are long enough (and the
  // decode worker takes parts); null otherwise.
  std::unique_ptr<PartSender> MakePartSender(const PrefillCall& call, int64_t resident_chunks);
  // Ships a prefilled bundle to the call's decode worker: the rest of its parts (when `parts`
  // sent some during the prefill), then the bundle; fills the result's transfer fields.
  absl::Status ShipBundle(const PrefillCall& call, PartSender* parts, StateBundle& bundle,
                          PrefillResult* result);
  int64_t KvRowBytes() const;   // of one position's K and V
  int64_t RowsPerPart() const;  // whole chunks, about options_.bundle_part_bytes

  const PrefillWorkerOptions options_;
  TurnQueue engine_;  // one prefill at a time on the backend, the others in arrival order
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<SnapshotStore> cache_;
  std::vector<DiscardedSnapshot> discarded_;
  ShippedChunks shipped_;  // what each decode worker was sent
  std::atomic<uint64_t> next_parts_id_{1};
  // Decode workers that refused a part as no bundle (an older version): sent bundles whole.
  mutable absl::Mutex no_parts_mu_;
  std::set<std::string> no_parts_peers_ ABSL_GUARDED_BY(no_parts_mu_);
  WarmBufferPool bundle_buffers_;  // serialised bundles, memory reused from one to the next
  // Copied-in snapshots are kept off the transport thread: saving one may write to disk.
  std::unique_ptr<BoundedJobQueue> imports_;
  SnapshotFile received_;                    // transport thread only: from verify to on_received
  std::unique_ptr<UcxTransport> transport_;  // last: its callbacks use the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_PREFILL_WORKER_H_
