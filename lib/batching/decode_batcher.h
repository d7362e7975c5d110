// DecodeBatcher: the decode worker's continuous batching loop. Sequences (restored from state
// bundles) join and leave between steps; every step is one batched forward pass over all
// active sequences. A maximum batch and a memory budget bound the active set (shared K/V chunks
// counted once: StateLedger); beyond them new sequences wait in a bounded queue, taken in
// FairOrder (priority, then tenants by weight, then arrival), and beyond that Admit refuses with
// RESOURCE_EXHAUSTED.
//
// Threading: one loop thread owns the backend; `on_event` callbacks run on it and must not
// block. Admit, Cancel and stats may be called from any thread.
#ifndef YOCO_LIB_BATCHING_DECODE_BATCHER_H_
#define YOCO_LIB_BATCHING_DECODE_BATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "lib/batching/state_ledger.h"
#include "lib/engine/backend.h"
#include "lib/engine/generation.h"
#include "lib/model/sampling_params.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {

struct DecodeBatcherOptions {
  int max_batch = 32;                       // sequences per forward pass
  int64_t memory_budget_bytes = 8LL << 30;  // decoding state of all active sequences
  int max_queue = 256;                      // sequences waiting for room
  // Seats beyond max_batch, each for a sequence of a tenant with none in the batch: while one
  // tenant fills every seat, another's request starts at the next step instead of waiting for a
  // seat to free (a long answer can hold one for thousands of steps). -1: max_batch / 4, at
  // least 1.
  int tenant_reserve_seats = -1;
};

enum class DecodeFinish { kLength, kStop, kEos, kCancelled, kError };

// How a sequence ends after a token that StopAfter judged: kLength when the token does not end
// it (the count of tokens decides then).
inline DecodeFinish FinishFor(TokenStop stop) {
  switch (stop) {
    case TokenStop::kStopToken:
      return DecodeFinish::kStop;
    case TokenStop::kEos:
      return DecodeFinish::kEos;
    case TokenStop::kNone:
      break;
  }
  return DecodeFinish::kLength;
}

struct DecodeEvent {
  bool finished = false;
  int32_t token = -1;                           // the new token (when not finished)
  std::optional<TokenLogprobs> logprobs;        // its log-probabilities, when the sampling asks
  int generated = 0;                            // tokens produced so far for this sequence
  DecodeFinish reason = DecodeFinish::kLength;  // when finished
  absl::Status status;                          // kError: why
  uint32_t choice = 0;                          // DecodeChoiceCall::choice (n > 1)
};

struct DecodeSequence {
  Generation generation;     // restored from the bundle: state + pending token + sampling
  int max_new_tokens = 0;    // tokens to produce here (after any the generation replays)
  bool stop_at_eos = false;  // the sampling's stop ids always stop
  std::function<void(const DecodeEvent&)> on_event;
  SchedulingClass scheduling;  // its place among the waiting ones
  uint32_t choice = 0;         // which of its request's choices (CancelChoice)
};

struct DecodeBatcherStats {
  int active = 0;
  int queued = 0;
  int64_t memory_in_use_bytes = 0;  // reserved for the active sequences (StateLedger)
  int64_t memory_budget_bytes = 0;  // DecodeBatcherOptions::memory_budget_bytes
  uint64_t steps = 0;
  uint64_t tokens = 0;  // decoded: one per active sequence per step
  int last_batch_size = 0;
};

class DecodeBatcher {
 public:
  DecodeBatcher(Backend& backend, DecodeBatcherOptions options);
  // Finishes every sequence with kCancelled and stops the loop.
  ~DecodeBatcher();
  DecodeBatcher(const DecodeBatcher&) = delete;
  DecodeBatcher& operator=(const DecodeBatcher&) = delete;

  // Queues a sequence; returns its id. RESOURCE_EXHAUSTED when the queue is full (load: later
  // it may fit), FAILED_PRECONDITION when the sequence alone could never fit the memory budget;
  // INVALID_ARGUMENT for max_new_tokens < 1.
  absl::StatusOr<uint64_t> Admit(DecodeSequence sequence);
  // Queues the choices of one request (sequences from one prompt, sharing its K/V chunks) under
  // one id, all or none: each joins the batch when it fits, in order, and Cancel ends them all.
  // The errors of Admit, for any of them.
  absl::StatusOr<uint64_t> AdmitChoices(std::vector<DecodeSequence> choices);
  // Ends a sequence (or a request's choices), queued or active, with kCancelled at the next
  // step boundary; its memory is released then. Unknown ids are ignored.
  void Cancel(uint64_t id);
  // Ends the sequence of `choice` (DecodeSequence::choice) among those queued under `id` the
  // same way; the others go on. A choice the request does not have is ignored.
  void CancelChoice(uint64_t id, uint32_t choice);
  DecodeBatcherStats stats() const;

  // Memory a sequence reserves: its state now plus the K/V rows of max_new_tokens more tokens
  // (and of those it replays first).
  static int64_t ReservedBytes(const ModelConfig& config, const SequenceState& state,
                               int max_new_tokens);
  // The most K/V rows (state position + max_new_tokens) whose ReservedBytes fit `budget_bytes`:
  // a longer sequence is refused whatever else runs.
  static int64_t MaxSequenceRows(const ModelConfig& config, int64_t budget_bytes);

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace yoco

#endif  // YOCO_LIB_BATCHING_DECODE_BATCHER_H_
