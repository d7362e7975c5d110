// Logit adjustments. Each id is adjusted by its own counts only, so the order in which the hash
// map is walked cannot change a bit.
#include "lib/engine/token_history.h"

#include <algorithm>
#include <cmath>

namespace yoco {
namespace {

float Repeated(float logit, float penalty) {
  return logit > 0.0f ? logit / penalty : logit * penalty;
}

}  // namespace

TokenHistory::TokenHistory(absl::Span<const int32_t> prompt, absl::Span<const int32_t> generated)
    : prompt_ids_(prompt.begin(), prompt.end()) {
  std::sort(prompt_ids_.begin(), prompt_ids_.end());
  prompt_ids_.erase(std::unique(prompt_ids_.begin(), prompt_ids_.end()), prompt_ids_.end());
  for (int32_t id : generated) Add(id);
}

void TokenHistory::Add(int32_t generated_token) {
  ++counts_[generated_token];
  ++generated_;
}

void TokenHistory::Adjust(const SamplingParams& sampling, absl::Span<float> logits) const {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (in_vocab(id)) logits[id] += bias;
  }
  if (sampling.repetition_penalty != 1.0f) {
    for (int32_t id : prompt_ids_) {
      if (in_vocab(id)) logits[id] = Repeated(logits[id], sampling.repetition_penalty);
    }
    for (const auto& [id, count] : counts_) {
      if (in_vocab(id) && !std::binary_search(prompt_ids_.begin(), prompt_ids_.end(), id)) {
        logits[id] = Repeated(logits[id], sampling.repetition_penalty);
      }
    }
  }
  if (sampling.frequency_penalty != 0.0f || sampling.presence_penalty != 0.0f) {
    for (const auto& [id, count] : counts_) {
      if (!in_vocab(id)) continue;
      logits[id] -= sampling.frequency_penalty * static_cast<float>(count);
      logits[id] -= sampling.presence_penalty;
    }
  }
  if (generated_ < sampling.min_tokens) {
    if (kEosId < vocab) logits[kEosId] = -INFINITY;
    for (int32_t id : sampling.stop_token_ids) {
      if (in_vocab(id)) logits[id] = -INFINITY;
    }
  }
}

}  // namespace yoco
