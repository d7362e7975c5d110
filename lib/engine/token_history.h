// TokenHistory: what SamplingParams' logit adjustments (penalties, min_tokens) depend on — the
// tokens a request has generated, counted per id, and the ids its prompt holds. A pure function
// of the sequence so far, so a request resumed on another worker (from a bundle, or prefilled
// again with the tokens already sent) adjusts exactly as it would have where it started.
#ifndef YOCO_LIB_ENGINE_TOKEN_HISTORY_H_
#define YOCO_LIB_ENGINE_TOKEN_HISTORY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "lib/model/sampling_params.h"

namespace yoco {

class TokenHistory {
 public:
  TokenHistory() = default;
  // A request whose prompt holds `prompt` (any order, repeats allowed) and which has generated
  // `generated` so far.
  TokenHistory(absl::Span<const int32_t> prompt, absl::Span<const int32_t> generated);

  void Add(int32_t generated_token);
  int64_t generated() const { return generated_; }
  // The prompt's distinct ids, ascending (what repetition_penalty needs of a prompt).
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }

  // Applies `sampling`'s adjustments to `logits` [vocab] in place (SamplingParams says which
  // and in what order). REQUIRES: sampling validated for this vocabulary.
  void Adjust(const SamplingParams& sampling, absl::Span<float> logits) const;

 private:
  std::vector<int32_t> prompt_ids_;
  absl::flat_hash_map<int32_t, int32_t> counts_;  // generated id -> times
  int64_t generated_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_TOKEN_HISTORY_H_
