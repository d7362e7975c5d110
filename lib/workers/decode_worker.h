// DecodeWorker: the decode side of disaggregated serving, without RPC. Receives state bundles
// over UcxTransport (checked against this worker's model before they are taken), and runs the
// sequences in a continuously batched loop when their Decode call arrives. Bundles waiting for
// their call count against the state-memory budget and are dropped on a timer when nobody
// claims them; Decode calls wait a bounded time for their bundle, and end at once when the
// caller cancels. With a second backend it also prefills short prompts itself (conditional
// disaggregation: shipping a short uncached prompt's state costs more than computing it here);
// such a sequence then joins the same batch.
#ifndef YOCO_LIB_WORKERS_DECODE_WORKER_H_
#define YOCO_LIB_WORKERS_DECODE_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/batching/decode_batcher.h"
#include "lib/cache/cached_prefill.h"
#include "lib/cache/resident_kv.h"
#include "lib/engine/backend.h"
#include "lib/engine/sampler.h"
#include "lib/engine/state_bundle.h"
#include "lib/engine/warm_buffer_pool.h"
#include "lib/grammar/structured_output.h"
#include "lib/scheduling/scheduling_class.h"
#include "lib/threading/bounded_job_queue.h"
#include "lib/transport/ucx_transport.h"
#include "lib/workers/bundle_part_store.h"
#include "lib/workers/bundle_transport.h"

namespace yoco {

struct DecodeWorkerOptions {
  DecodeBatcherOptions batcher;
  // Structured output's constraints (PrefillWorkerOptions::structured_output).
  std::shared_ptr<const StructuredOutput> structured_output;
  UcxTransportOptions transport;
  absl::Duration unclaimed_bundle_ttl = absl::Seconds(60);
  absl::Duration unclaimed_sweep_interval = absl::Seconds(1);
  // Local prefills waiting for the prefill backend beyond the one running; one more is refused
  // with RESOURCE_EXHAUSTED.
  int max_local_prefills_waiting = 4;
  // Longer prompts are refused with FAILED_PRECONDITION (the router then ships them): a local
  // prefill holds up the batch, and the router sends only short ones.
  int local_prefill_max_tokens = 2048;
  // Shared-K/V chunks of named bundles kept after their sequences end (ResidentKv), so that
  // the next question on a document is sent without them: the most bytes kept for no sequence.
  int64_t resident_kv_budget_bytes = int64_t{1} << 30;
  // Idle memory kept for receiving bundles (WarmBufferPool): a long document's bundle received
  // into fresh memory costs more than its transfer.
  int64_t transfer_buffer_keep_bytes = int64_t{1} << 30;
  // Touches at start the memory bundles will use (the receive buffers' bound and
  // resident_kv_budget_bytes of K/V chunks), so that the first long documents received do not
  // pay for fresh pages: in a virtual machine those cost more than the transfer.
  bool prefault = false;
};

// One choice of a request that asks for several (SamplingParams' n > 1): its own sequence from
// the request's one state, its shared K/V chunks referenced, drawing with seed
// ChoiceSeed(seed, choice). Its events carry `choice`.
struct DecodeChoiceCall {
  uint32_t choice = 0;
  // The choice's tokens the client has already: the first becomes the pending token and the
  // rest are replayed (Generation::set_replay), not streamed. A shipped call needs at least the
  // first; a local prefill draws it when empty.
  std::vector<int32_t> sent;
  int max_new_tokens = 0;  // still to produce after `sent`
};

// A bundle shipped by a prefill worker, to decode here.
struct ShippedDecodeCall {
  uint64_t sender = 0;  // the prefill worker's transport id and its transfer
  uint64_t transfer_id = 0;
  int max_new_tokens = 0;  // tokens to produce here (the prefill worker produced the first)
  bool stop_at_eos = false;
  absl::Duration wait = kDefaultTransferWait;  // for the bundle to arrive
  SchedulingClass scheduling;                  // its place in the batch's queue
  // The call's sampling, replacing the bundle's (which lacks logprobs and the logit
  // adjustments); none: the bundle's. With it, the request's tokens so far (TokenHistory): all
  // it generated, the bundle's pending token included, and the prompt's distinct ids.
  std::optional<SamplingParams> sampling;
  std::vector<int32_t> generated;
  std::vector<int32_t> prompt_ids;
  // Choices (with `sampling`): one sequence each instead of one for the call, whose
  // max_new_tokens and generated are unused then.
  std::vector<DecodeChoiceCall> choices;
};

struct LocalPrefillCall {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_new_tokens = 0;  // the first token included
  bool stop_at_eos = false;
  SchedulingClass scheduling;  // its place in the local-prefill queue, then in the batch's
  int64_t generated_tail = 0;  // PrefillOptions::generated_tail (a retry's tokens already sent)
  std::vector<DecodeChoiceCall> choices;  // as ShippedDecodeCall's (max_new_tokens unused then)
};

class DecodeWorker {
 public:
  // `prefill_backend` (another instance over the same model; may be null) runs local prefills,
  // one at a time, beside the batch.
  static absl::StatusOr<std::unique_ptr<DecodeWorker>> Create(
      std::unique_ptr<Backend> backend, const DecodeWorkerOptions& options,
      std::unique_ptr<Backend> prefill_backend = nullptr);
  ~DecodeWorker();

  // Where prefill workers send bundles.
  const std::string& address() const { return transport_->address(); }

  // The blocking form of DecodeWhenArrived (for callers with a thread to spare, e.g. tests):
  // waits up to `call.wait` for the bundle of transfer (sender, transfer_id), then decodes
  // `call.max_new_tokens` tokens, streaming them to `on_event` (on the batching thread). Returns
  // the batcher's sequence id for Cancel. DEADLINE_EXCEEDED when the bundle does not come,
  // CANCELLED soon after `cancelled` (polled while waiting) says so, RESOURCE_EXHAUSTED when
  // the worker is full.
  absl::StatusOr<uint64_t> Decode(const ShippedDecodeCall& call,
                                  std::function<void(const DecodeEvent&)> on_event,
                                  const std::function<bool()>& cancelled = nullptr);
  // The blocking form of PrefillAndDecodeAsync: prefills `call.prompt` here, sends its first
  // token to `on_event` (on the worker's prefill thread), then decodes the rest in the batch as
  // Decode does; the events' `generated` count the first
  // token. Returns the sequence id for Cancel, or 0 when the first token ended the request
  // (its finish event sent). FAILED_PRECONDITION without a prefill backend, INVALID_ARGUMENT
  // for a bad prompt or sampling, RESOURCE_EXHAUSTED when too many wait, CANCELLED;
  // FAILED_PRECONDITION also for a prompt beyond DecodeWorkerOptions::local_prefill_max_tokens.
  absl::StatusOr<uint64_t> PrefillAndDecode(const LocalPrefillCall& call,
                                            std::function<void(const DecodeEvent&)> on_event,
                                            const std::function<bool()>& cancelled = nullptr);
  // The same without blocking the caller (an RPC callback thread): the prefill runs on the
  // worker's own thread, one at a time, and `on_admitted` gets what PrefillAndDecode returns
  // (INVALID_ARGUMENT and FAILED_PRECONDITION before anything runs, RESOURCE_EXHAUSTED when
  // DecodeWorkerOptions::max_local_prefills_waiting already wait). `cancelled` is polled on
  // that thread.
  void PrefillAndDecodeAsync(LocalPrefillCall call,
                             std::function<void(const DecodeEvent&)> on_event,
                             std::function<bool()> cancelled,
                             std::function<void(absl::StatusOr<uint64_t>)> on_admitted);
  bool local_prefill() const { return prefill_backend_ != nullptr; }
  uint64_t local_prefills() const { return local_prefills_.load(); }

  void Cancel(uint64_t sequence_id) { batcher_->Cancel(sequence_id); }
  // Ends one choice of a request with choices (its number, DecodeChoiceCall::choice).
  void CancelChoice(uint64_t sequence_id, uint32_t choice) {
    batcher_->CancelChoice(sequence_id, choice);
  }

  // Decode without blocking the caller: `on_admitted` gets the sequence id (or the error) as
  // soon as the bundle is there (at once when it already is; on the transport thread when it
  // arrives; DEADLINE_EXCEEDED after `call.wait`). Returns a ticket for CancelWaiting (0: already
  // admitted or refused).
  uint64_t DecodeWhenArrived(const ShippedDecodeCall& call,
                             std::function<void(const DecodeEvent&)> on_event,
                             std::function<void(absl::StatusOr<uint64_t>)> on_admitted);
  // Ends a wait with CANCELLED, unless it is already over.
  void CancelWaiting(uint64_t ticket);

  DecodeBatcherStats stats() const { return batcher_->stats(); }
  uint64_t fingerprint() const { return backend_->model().fingerprint(); }
  // VocabularyFingerprint of the structured-output vocabulary; 0 without one.
  uint64_t vocabulary_fingerprint() const {
    return structured_output_ ? structured_output_->vocabulary_fingerprint() : 0;
  }
  size_t waiting_bundles() const;
  // Bytes of the bundles waiting for their Decode call (part of the state-memory budget).
  int64_t waiting_bundle_bytes() const;
  const TransferMetrics& transfer_metrics() const { return transport_->metrics(); }
  ResidentKvStats resident_kv_stats() const { return resident_->stats(); }
  WarmBufferPoolStats bundle_buffer_stats() const { return bundle_buffers_->stats(); }
  // The longest sequence (K/V rows) the state budget holds (DecodeBatcher::MaxSequenceRows).
  int64_t max_sequence_rows() const { return max_sequence_rows_; }
  // Readiness: whether one more request would be taken now. Not when the batch and the queue
  // are both full (Admit would refuse it), nor when the state memory left (after the active
  // sequences and the bundles waiting for their call) cannot hold one more sequence of the
  // size of those active (of any size when none is).
  bool CanAdmit() const;

 private:
  DecodeWorker() = default;
  void OnBundle(const IncomingTransfer& t, ByteBuffer data);
  // Before a bundle's data: refused when the waiting bundles would outgrow the budget.
  absl::Status OnBundleStart(const IncomingTransfer& t);
  // Drops bundles older than the TTL; mu_ held.
  void DropUnclaimedLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLoop();
  // What PrefillAndDecode refuses before any work (the prefill backend exists).
  absl::Status CheckLocalPrefill(const LocalPrefillCall& call) const;
  // One local prefill and its admission to the batch, on the prefill thread.
  absl::StatusOr<uint64_t> RunLocalPrefill(const LocalPrefillCall& call,
                                           std::function<void(const DecodeEvent&)> on_event,
                                           const std::function<bool()>& cancelled);
  // A local prefill's choices (LocalPrefillCall::choices): first tokens drawn and sent, the
  // choices going on admitted.
  absl::StatusOr<uint64_t> AdmitLocalChoices(
      const LocalPrefillCall& call, CachedPrefillResult prefill,
      const std::function<void(const DecodeEvent&)>& on_event);
  absl::StatusOr<uint64_t> AdmitBundle(StateBundle bundle, const ShippedDecodeCall& call,
                                       std::function<void(const DecodeEvent&)> on_event);
  // The choices' sequences from `bundle` (its state; the pending token each choice's first
  // sent one), admitted under one id. `drawn_here`: choices whose first token this worker
  // drew (a local prefill), whose events count it.
  absl::StatusOr<uint64_t> AdmitChoices(StateBundle bundle, const SamplingParams& sampling,
                                        const std::vector<int32_t>& prompt_ids,
                                        const std::vector<DecodeChoiceCall>& choices,
                                        const std::vector<bool>& drawn_here, bool stop_at_eos,
                                        const SchedulingClass& scheduling,
                                        std::function<void(const DecodeEvent&)> on_event);
  struct Waiter {
    std::pair<uint64_t, uint64_t> key;
    ShippedDecodeCall call;
    absl::Time deadline;
    std::function<void(const DecodeEvent&)> on_event;
    std::function<void(absl::StatusOr<uint64_t>)> on_admitted;
  };
  // Takes the bundle of `key` out of arrived_; mu_ held, the key present.
  StateBundle TakeArrivedLocked(const std::pair<uint64_t, uint64_t>& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> prefill_backend_;  // null: no local prefill
  // The local prefills: one running, up to max_local_prefills_waiting queued behind it.
  std::unique_ptr<BoundedJobQueue> prefill_jobs_;
  std::atomic<uint64_t> local_prefills_{0};
  int local_prefill_max_tokens_ = 0;
  std::shared_ptr<const StructuredOutput> structured_output_;
  absl::Duration unclaimed_ttl_;
  absl::Duration sweep_interval_;
  int64_t memory_budget_bytes_ = 0;
  int64_t max_sequence_rows_ = 0;  // DecodeBatcher::MaxSequenceRows of the budget
  DecodeBatcherOptions batcher_options_;
  std::unique_ptr<DecodeBatcher> batcher_;
  std::unique_ptr<ResidentKv> resident_;            // used on the transport thread
  std::unique_ptr<WarmBufferPool> bundle_buffers_;  // received bundles, memory reused

  struct Arrived {
    StateBundle bundle;
    int64_t bytes = 0;
    absl::Time arrival;
  };
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<std::pair<uint64_t, uint64_t>, Arrived> arrived_ ABSL_GUARDED_BY(mu_);
  int64_t arrived_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);  // by ticket
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  StateBundle verified_;             // transport thread only: from verify to on_received
  int64_t verified_part_bytes_ = 0;  // transport thread only: the parts joined into verified_
  bool verified_a_part_ = false;     // transport thread only: the last verified was a part
  // Parts of bundles not yet arrived.
  BundlePartStore parts_;
  std::thread sweeper_;

  std::unique_ptr<UcxTransport> transport_;  // last: its callbacks use the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_DECODE_WORKER_H_
