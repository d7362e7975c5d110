// WorkerRegistry: the router's view of one pool of workers (prefill or decode). A background
// thread probes every worker's WorkerInfo at a fixed interval; a worker that does not answer,
// or that the router saw fail, is skipped until it answers again. For prefill workers it also
// keeps the index of which prefix-cache snapshots each worker holds, refreshed whenever the
// worker's cache generation changes, so it is rebuilt from the workers after a router restart.
//
// Choosing a worker prices "resume from the snapshot on worker X" against load:
//   cost = prompt tokens X would still prefill + load × load_penalty_tokens
//          (+ disk_penalty_tokens when X holds that snapshot on disk only),
// load = requests this router has in flight to it (exact, current) + the active and queued
// requests it reported beyond those at the last probe (other routers' work).
#ifndef YOCO_LIB_ROUTING_WORKER_REGISTRY_H_
#define YOCO_LIB_ROUTING_WORKER_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "lib/cache/block_key.h"
#include "lib/routing/cache_event_log.h"
#include "lib/threading/periodic_task.h"
#include "yoco/v1/worker.pb.h"

namespace yoco {

// One entry of a worker's prefix cache, as the router indexes it.
struct IndexedSnapshot {
  BlockKey key;
  bool disk_only = false;  // not in the worker's memory: a hit loads it first
  absl::Time expires = absl::InfiniteFuture();
};

// Why a snapshot the index saw on a worker is gone: its TTL had passed, or it was pushed out
// (budget, EvictCache) before.
enum class ForgottenReason { kExpired, kEvicted };

struct WorkerProbes {
  std::function<absl::StatusOr<v1::WorkerInfo>(size_t worker)> info;
  // The snapshots a worker holds; null for workers without a prefix cache.
  std::function<absl::StatusOr<std::vector<IndexedSnapshot>>(size_t worker)> snapshots;
  // Where relistings record what appeared and vanished (null: nowhere). Outlives the registry.
  CacheEventLog* events = nullptr;
};

struct WorkerChoice {
  size_t index = 0;
  v1::WorkerInfo info;
  int64_t cached_tokens = 0;  // of the prompt, per the index
  // The healthy worker holding the longest snapshot of the prompt, when that is longer than the
  // chosen worker's (load won): a candidate to copy the snapshot from.
  std::optional<size_t> better_holder;
  int64_t better_cached_tokens = 0;
};

// What a choice weighs (WorkerRegistry::Choose).
struct WorkerQuery {
  absl::Span<const size_t> exclude = {};  // failed or refused this request already
  absl::Span<const BlockKey> keys = {};   // the prompt's usable block keys; empty: by load alone
  int64_t prompt_tokens = 0;
  int64_t load_penalty_tokens = 0;  // what one request in flight costs, in tokens to prefill
  int64_t disk_penalty_tokens = 0;  // what restoring a prefix from disk costs, likewise
  // Non-empty: only workers running one of these model versions (their model fingerprints), so
  // that a prefill and a decode worker of one request run the same weights during a rollout.
  absl::Span<const uint64_t> fingerprints = {};
};

class WorkerRegistry {
 public:
  // Probes once before returning, then every `interval` on its own thread (none if zero).
  // Probes address workers by index: a probe for index i must reach the worker Add returned i
  // for.
  WorkerRegistry(std::vector<std::string> addresses, WorkerProbes probes, absl::Duration interval);
  ~WorkerRegistry();

  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  void ProbeAll();
  void Probe(size_t index);

  // Discovery. Add: a worker at `address` joins (and is probed), or one removed earlier comes
  // back; returns its index, which never changes. Remove: it gets no new requests (calls in
  // flight finish on their own) and leaves the snapshot index. Indices are never reused, so a
  // request holding one is never redirected to another worker.
  size_t Add(const std::string& address);
  void Remove(const std::string& address);
  // The addresses of the workers not removed.
  std::vector<std::string> Members() const;
  // The router saw the worker fail: skipped until a probe succeeds again.
  void MarkFailed(size_t index);
  // For a pool without a snapshot listing (decode workers): the worker was sent the K/V of the
  // prefix whose last block key is `key` and keeps it (ResidentKv), so Choose counts that prefix
  // as held there, against load as for a prefill worker's snapshots. A guess the worker may
  // have outlived (it then refuses the lean bundle, and gets it whole): at most kMaxNoted keys
  // per worker, the oldest forgotten first, all of them when the worker fails.
  void NoteHeld(size_t index, const BlockKey& key);
  static constexpr size_t kMaxNoted = 4096;

  // The cheapest healthy worker not excluded: tokens left to prefill (the prompt less the
  // longest prefix it holds) + load_penalty_tokens per request in flight (+ disk_penalty_tokens
  // when that prefix is on its disk only). Never waits on a probe (the router chooses on gRPC's
  // callback threads): with none healthy it asks the probing thread to run at once (ProbeSoon)
  // and returns none; the caller looks again later, or probes itself where it may block.
  std::optional<WorkerChoice> Choose(const WorkerQuery& query);
  // The probing thread's next round starts now (none without a probe interval).
  void ProbeSoon();

  // Counts a request in flight to a worker for as long as it lives.
  class InFlight {
   public:
    InFlight(WorkerRegistry& registry, size_t index);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    WorkerRegistry& registry_;
    size_t index_;
  };

  // Why the longest of `keys` that the index saw go is no longer held by any worker, so that a
  // miss on a worker that never held it can still say why ("none" would hide an expiry); none
  // when a healthy worker holds a longer one or the index never saw them go.
  std::optional<ForgottenReason> WhyForgotten(absl::Span<const BlockKey> keys) const;
  // The snapshots the index has on healthy workers now, as stored events (a watcher's start).
  std::vector<CacheEvent> Placement() const;

  size_t size() const;
  std::string address(size_t index) const;
  bool healthy(size_t index) const;
  // The model fingerprint a healthy worker reports (0 when none is healthy).
  uint64_t fingerprint() const;
  // The model versions healthy workers run, except those in `exclude` (each once, ascending).
  std::vector<uint64_t> HealthyFingerprints(absl::Span<const size_t> exclude = {}) const;
  // The most K/V rows a sequence can hold on any healthy worker (WorkerInfo.max_sequence_rows);
  // 0 when none is healthy or one does not say (nothing known for sure).
  uint64_t LongestSequenceRows() const;
  std::vector<size_t> HealthyWorkers() const;

 private:
  struct Worker {
    std::string address;
    bool healthy = false;
    v1::WorkerInfo info;
    uint32_t in_flight = 0;
    uint32_t in_flight_at_probe = 0;
    bool listed = false;  // `snapshots` reflects `listed_generation`
    uint64_t listed_generation = 0;
    std::map<BlockKey, IndexedSnapshot> snapshots;
    std::deque<BlockKey> noted;    // NoteHeld's keys in `snapshots`, oldest first
    bool removed = false;          // by discovery: no new requests
    std::string unusable_because;  // the last probe's refusal (not UNAVAILABLE), logged once
  };
  // Snapshots that vanished from a relisting, oldest first, at most kMaxForgotten.
  static constexpr size_t kMaxForgotten = 4096;
  // What a relisting of `w` shows happened since the last one.
  std::vector<CacheEvent> ChangesLocked(const Worker& w, const std::vector<IndexedSnapshot>& listed,
                                        absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers why the snapshots `changes` (ChangesLocked's) show gone went, for miss reasons;
  // those `listed` again are forgotten no more.
  void RememberGoneLocked(const std::vector<IndexedSnapshot>& listed,
                          const std::vector<CacheEvent>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkFailedLocked(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerProbes probes_;
  std::deque<Worker> workers_ ABSL_GUARDED_BY(mu_);  // grows (Add), never shrinks
  std::map<BlockKey, ForgottenReason> forgotten_;
  std::deque<BlockKey> forgotten_order_;
  mutable absl::Mutex mu_;
  std::unique_ptr<PeriodicTask> prober_;  // last: it probes through the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_WORKER_REGISTRY_H_
