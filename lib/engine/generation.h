// Generation: one sequence being generated, token by token, on a Backend. Holds the sequence
// state, the sampled-but-not-yet-fed token and the sampling parameters, i.e. exactly what a
// StateBundle carries, so a generation can stop on one machine and continue on another.
#ifndef YOCO_LIB_ENGINE_GENERATION_H_
#define YOCO_LIB_ENGINE_GENERATION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/engine/backend.h"
#include "lib/engine/logprobs.h"
#include "lib/engine/sampler.h"
#include "lib/engine/state_bundle.h"
#include "lib/engine/token_history.h"
#include "lib/model/logit_constraint.h"

namespace yoco {

// How Generation::Prefill runs a prompt.
struct PrefillOptions {
  // The state to continue from: the first `start->position` prompt tokens already processed
  // (a prefix-cache snapshot). Taken (moved from). Null: from the empty state.
  SequenceState* start = nullptr;
  // > 0: the prompt runs in segments cut at absolute positions that are multiples of `grid`.
  // Floating-point results depend on where segments start, so with a fixed grid a prefill that
  // resumes from a snapshot at a grid boundary computes bit for bit what an uncached prefill
  // computes. 0: one segment.
  int grid = 0;
  // Called with the state at every grid boundary the prefill passes, the prompt's end included
  // when it is one (after the segment that ends there), e.g. to save snapshots.
  std::function<void(const SequenceState&)> on_boundary;
  // Checked before every segment: true stops the prefill with CANCELLED.
  std::function<bool()> cancelled;
  // Called after every segment with the tokens processed so far (the start state's included).
  std::function<void(int64_t position)> progress;
  // The prompt's last tokens that this request generated already (a retry continues its
  // stream): the sampling's penalties and min_tokens count them as output (TokenHistory).
  int64_t generated_tail = 0;
  // Structured output: the rule on the tokens drawn (cloned; the generated tail is accepted
  // before the first draw). Null: none.
  const LogitConstraint* constraint = nullptr;
};

// NextBatch's token for a sequence whose logits held a NaN or infinity.
inline constexpr int32_t kNonFiniteLogits = -1;

// DATA_LOSS naming the position when any logit is NaN or infinite.
absl::Status CheckFinite(absl::Span<const float> logits, int64_t position);

// INVALID_ARGUMENT, before any work, for a prompt no generation can start from: empty, a token
// outside the vocabulary, or longer than max_seq_len (the message gives the prompt's length).
absl::Status CheckPrompt(const ModelConfig& config, absl::Span<const int32_t> prompt);
absl::Status NonFiniteLogitsError(int64_t position);

// A choice's first token (SamplingParams' n > 1), drawn from a prefill's logits.
struct ChoiceDraw {
  uint32_t choice = 0;
  int32_t token = -1;
  std::optional<TokenLogprobs> logprobs;  // when the sampling asks for them
};

class Generation {
 public:
  // The reference loop's start: prefill all but the last prompt token; the last one becomes
  // the pending input of the first decode step. REQUIRES: a non-empty prompt.
  static absl::StatusOr<Generation> Start(Backend& backend, absl::Span<const int32_t> prompt,
                                          SamplingParams sampling);

  // The disaggregated start: prefill the whole prompt with the cross-decoder run for its last
  // position only (early exit), and sample the first new token from those logits. The result is
  // what a prefill worker ships. Gives the same tokens as Start + Next.
  static absl::StatusOr<Generation> Prefill(Backend& backend, absl::Span<const int32_t> prompt,
                                            SamplingParams sampling, int32_t* first_token,
                                            const PrefillOptions& options = {});

  static absl::StatusOr<Generation> FromBundle(StateBundle bundle);
  StateBundle ToBundle(uint64_t model_fingerprint) const;

  // The first token of each of `choices`, drawn from the logits this generation's Prefill ended
  // with: choice c as a Prefill with seed ChoiceSeed(seed, c) draws it (its pending token is
  // choice 0's). REQUIRES: made by Prefill, no step taken since.
  std::vector<ChoiceDraw> DrawChoices(absl::Span<const uint32_t> choices) const;

  // Tokens the next steps feed after the pending one instead of drawing (a retry's tokens the
  // client has already): a step that takes one reports replayed(), and the draws resume after
  // the last, exactly as if they had been drawn here.
  void set_replay(std::vector<int32_t> tokens);
  int64_t replay_left() const { return static_cast<int64_t>(replay_.size()) - replay_next_; }
  bool replayed() const { return replayed_; }

  // Feeds the pending token, samples the next one, and makes it pending.
  absl::StatusOr<int32_t> Next(Backend& backend);

  // One decode step for many generations at once (one batched forward pass); tokens[i] is the
  // token sampled for generations[i].
  // A row whose logits are not all finite yields kNonFiniteLogits for its generation (which then
  // cannot continue); the others proceed.
  static absl::Status NextBatch(Backend& backend, absl::Span<Generation* const> generations,
                                std::vector<int32_t>* tokens);

  const SequenceState& state() const { return state_; }
  int32_t pending_token() const { return pending_; }
  // The pending token's log-probabilities, when the sampling asks for them (logprobs >= 0) and
  // this generation sampled it (not one restored from a bundle).
  const std::optional<TokenLogprobs>& pending_logprobs() const { return pending_logprobs_; }
  const SamplingParams& sampling() const { return sampling_; }
  // What later tokens report (SamplingParams::logprobs); a bundle does not carry it.
  void set_logprobs(int32_t logprobs) { sampling_.logprobs = logprobs; }
  // A decode call's sampling and the request's tokens so far, replacing a bundle's (which
  // carries neither logprobs nor the logit adjustments, nor any history).
  void set_sampling(SamplingParams sampling) { sampling_ = std::move(sampling); }
  void set_history(TokenHistory history) { history_ = std::move(history); }
  // A decode call's structured-output rule, having accepted the tokens generated so far (a
  // bundle does not carry it).
  void set_constraint(std::unique_ptr<LogitConstraint> constraint) {
    constraint_ = HeldConstraint(std::move(constraint));
  }
  const TokenHistory& history() const { return history_; }

 private:
  // Samples the next pending token (at the state's position) from its logits [vocab].
  void SampleFrom(absl::Span<const float> logits);

  Generation(SequenceState state, int32_t pending, SamplingParams sampling)
      : state_(std::move(state)), pending_(pending), sampling_(std::move(sampling)) {}

  SequenceState state_;
  int32_t pending_;
  SamplingParams sampling_;
  std::optional<TokenLogprobs> pending_logprobs_;
  TokenHistory history_;             // kept when the sampling adjusts logits
  TokenHistory first_history_;       // Prefill's, before its draw (DrawChoices)
  HeldConstraint constraint_;        // structured output's rule, advanced with every token
  HeldConstraint first_constraint_;  // Prefill's, before its draw (DrawChoices)
  std::vector<int32_t> replay_;      // set_replay's tokens; replay_next_ is the next to feed
  size_t replay_next_ = 0;
  bool replayed_ = false;
  std::vector<float> adjusted_;  // the logits after those adjustments
  Sampler sampler_;
  std::vector<float> logits_;
  std::vector<ForwardSegment> segments_;
  std::vector<int32_t> next_tokens_;
};

struct GenerateOptions {
  int max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = false;  // also stop after emitting EOS (id 2)
};

// The whole loop of `yoco generate`: Start, then Next until max_new_tokens or a stop token (which
// is included in the result).
absl::StatusOr<std::vector<int32_t>> Generate(Backend& backend, absl::Span<const int32_t> prompt,
                                              const GenerateOptions& options);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_GENERATION_H_
