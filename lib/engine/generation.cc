// Generation loop; the position passed to the sampler is the new token's absolute index.
#include "lib/engine/generation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

absl::Status CheckStart(const Backend& backend, absl::Span<const int32_t> prompt,
                        const SamplingParams& sampling) {
  RETURN_IF_ERROR(CheckPrompt(backend.model().config(), prompt));
  return sampling.Validate(backend.model().config().vocab_size);
}

}  // namespace

absl::Status CheckPrompt(const ModelConfig& config, absl::Span<const int32_t> prompt) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  if (config.max_seq_len > 0 && prompt.size() > static_cast<size_t>(config.max_seq_len)) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt.size(),
                                                   " tokens; the model's max_seq_len is ",
                                                   config.max_seq_len));
  }
  return absl::OkStatus();
}

absl::Status NonFiniteLogitsError(int64_t position) {
  return absl::DataLossError(absl::StrCat("the model produced non-finite logits at position ",
                                          position,
                                          " (a defective checkpoint, or values beyond float "
                                          "range)"));
}

absl::Status CheckFinite(absl::Span<const float> logits, int64_t position) {
  for (float x : logits) {
    if (!std::isfinite(x)) return NonFiniteLogitsError(position);
  }
  return absl::OkStatus();
}

absl::StatusOr<Generation> Generation::Start(Backend& backend, absl::Span<const int32_t> prompt,
                                             SamplingParams sampling) {
  RETURN_IF_ERROR(CheckStart(backend, prompt, sampling));
  Generation gen(SequenceState::Create(backend.model().config()), prompt.back(),
                 std::move(sampling));
  if (gen.sampling_.AdjustsLogits()) gen.history_ = TokenHistory(prompt, {});
  if (prompt.size() > 1) {
    ForwardSegment seg{&gen.state_, prompt.subspan(0, prompt.size() - 1), LogitsMode::kNone};
    RETURN_IF_ERROR(backend.Forward({&seg, 1}, &gen.logits_));
  }
  return gen;
}

absl::StatusOr<Generation> Generation::Prefill(Backend& backend, absl::Span<const int32_t> prompt,
                                               SamplingParams sampling, int32_t* first_token,
                                               const PrefillOptions& options) {
  RETURN_IF_ERROR(CheckStart(backend, prompt, sampling));
  if (options.grid < 0) return absl::InvalidArgumentError("the prefill grid must be >= 0");
  SequenceState state = options.start != nullptr ? std::move(*options.start)
                                                 : SequenceState::Create(backend.model().config());
  if (state.position >= static_cast<int64_t>(prompt.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the start state covers ", state.position,
                                                   " tokens; the prompt must extend it (it has ",
                                                   prompt.size(), ")"));
  }
  Generation gen(std::move(state), -1, std::move(sampling));
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (options.generated_tail < 0 || options.generated_tail >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("generated_tail ", options.generated_tail, " must be in [0, ", n, ")"));
  }
  if (gen.sampling_.AdjustsLogits()) {
    gen.history_ = TokenHistory(prompt.subspan(0, n - options.generated_tail),
                                prompt.subspan(n - options.generated_tail));
  }
  if (options.constraint != nullptr) {
    gen.constraint_ = HeldConstraint(options.constraint->Clone());
    for (int32_t token : prompt.subspan(n - options.generated_tail)) gen.constraint_->Accept(token);
  }
  while (gen.state_.position < n) {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("the prefill was cancelled");
    }
    const int64_t from = gen.state_.position;
    const int64_t to = options.grid > 0 ? std::min(n, (from / options.grid + 1) * options.grid) : n;
    ForwardSegment seg{&gen.state_, prompt.subspan(from, to - from),
                       to == n ? LogitsMode::kLast : LogitsMode::kNone};
    RETURN_IF_ERROR(backend.Forward({&seg, 1}, &gen.logits_));
    if (options.on_boundary && options.grid > 0 && to % options.grid == 0) {
      options.on_boundary(gen.state_);
    }
    if (options.progress) options.progress(gen.state_.position);
  }
  RETURN_IF_ERROR(CheckFinite(gen.logits_, gen.state_.position));
  if (gen.sampling_.AdjustsLogits()) gen.first_history_ = gen.history_;
  gen.first_constraint_ = gen.constraint_;
  gen.SampleFrom(gen.logits_);
  *first_token = gen.pending_;
  return gen;
}

void Generation::SampleFrom(absl::Span<const float> logits) {
  const bool adjusts = sampling_.AdjustsLogits();
  if (adjusts || constraint_) {
    adjusted_.assign(logits.begin(), logits.end());
    if (adjusts) history_.Adjust(sampling_, absl::MakeSpan(adjusted_));
    if (constraint_) constraint_->Mask(absl::MakeSpan(adjusted_));
    pending_ = sampler_.Sample(sampling_, adjusted_, state_.position);
    if (adjusts) history_.Add(pending_);
    if (constraint_) constraint_->Accept(pending_);
  } else {
    pending_ = sampler_.Sample(sampling_, logits, state_.position);
  }
  if (sampling_.logprobs >= 0) {
    pending_logprobs_ = LogprobsOf(logits, pending_, sampling_.logprobs);
  } else {
    pending_logprobs_.reset();
  }
}

std::vector<ChoiceDraw> Generation::DrawChoices(absl::Span<const uint32_t> choices) const {
  std::vector<ChoiceDraw> draws;
  Sampler sampler;
  std::vector<float> adjusted;
  for (uint32_t c : choices) {
    SamplingParams sampling = sampling_;
    sampling.seed = ChoiceSeed(sampling_.seed, c);
    ChoiceDraw draw{.choice = c};
    if (sampling.AdjustsLogits() || first_constraint_) {
      adjusted = logits_;
      if (sampling.AdjustsLogits()) first_history_.Adjust(sampling, absl::MakeSpan(adjusted));
      if (first_constraint_) first_constraint_->Mask(absl::MakeSpan(adjusted));
      draw.token = sampler.Sample(sampling, adjusted, state_.position);
    } else {
      draw.token = sampler.Sample(sampling, logits_, state_.position);
    }
    if (sampling.logprobs >= 0) draw.logprobs = LogprobsOf(logits_, draw.token, sampling.logprobs);
    draws.push_back(std::move(draw));
  }
  return draws;
}

void Generation::set_replay(std::vector<int32_t> tokens) {
  replay_ = std::move(tokens);
  replay_next_ = 0;
}

absl::StatusOr<Generation> Generation::FromBundle(StateBundle bundle) {
  if (bundle.pending_token < 0) {
    return absl::FailedPreconditionError("state bundle has no pending token to continue from");
  }
  return Generation(std::move(bundle.state), bundle.pending_token, std::move(bundle.sampling));
}

StateBundle Generation::ToBundle(uint64_t model_fingerprint) const {
  return StateBundle{model_fingerprint, state_, pending_, sampling_};
}

absl::StatusOr<int32_t> Generation::Next(Backend& backend) {
  Generation* self = this;
  RETURN_IF_ERROR(NextBatch(backend, {&self, 1}, &next_tokens_));
  return next_tokens_[0];
}

absl::Status Generation::NextBatch(Backend& backend, absl::Span<Generation* const> generations,
                                   std::vector<int32_t>* tokens) {
  tokens->clear();
  if (generations.empty()) return absl::OkStatus();
  // The first generation's buffers hold the batch's segments and logits, so a steady decode
  // loop allocates nothing; logits rows come back in segment order.
  std::vector<ForwardSegment>& segments = generations[0]->segments_;
  std::vector<float>& logits = generations[0]->logits_;
  segments.clear();
  for (Generation* g : generations) {
    segments.push_back({&g->state_, {&g->pending_, 1}, LogitsMode::kLast});
  }
  RETURN_IF_ERROR(backend.Forward(segments, &logits));
  const int64_t V = backend.model().config().vocab_size;
  const int64_t n = static_cast<int64_t>(generations.size());
  tokens->assign(n, 0);
  // Each sequence's draw touches only its own state (the constraints' mask caches lock), so the
  // batch's draws run in parallel: a sampled draw reads the whole vocabulary (an exp per token),
  // which at batch 32 and a 100K vocabulary costs about a forward pass on one thread.
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    Generation* g = generations[i];
    absl::Span<const float> row(logits.data() + i * V, V);
    if (!CheckFinite(row, g->state_.position).ok()) {  // this sequence fails, not the batch
      (*tokens)[i] = kNonFiniteLogits;
      continue;
    }
    g->replayed_ = g->replay_next_ < g->replay_.size();
    if (g->replayed_) {
      g->pending_ = g->replay_[g->replay_next_++];
      if (g->sampling_.AdjustsLogits()) g->history_.Add(g->pending_);
      if (g->constraint_) g->constraint_->Accept(g->pending_);
      g->pending_logprobs_.reset();
    } else {
      g->SampleFrom(row);
    }
    (*tokens)[i] = g->pending_;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Generate(Backend& backend, absl::Span<const int32_t> prompt,
                                              const GenerateOptions& options) {
  if (options.max_new_tokens < 0) return absl::InvalidArgumentError("max_new_tokens must be >= 0");
  ASSIGN_OR_RETURN(Generation gen, Generation::Start(backend, prompt, options.sampling));
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < options.max_new_tokens) {
    ASSIGN_OR_RETURN(int32_t tok, gen.Next(backend));
    out.push_back(tok);
    if (StopAfter(options.sampling, options.stop_at_eos, tok) != TokenStop::kNone) break;
  }
  return out;
}

}  // namespace yoco
