// Token sampling: greedy, temperature, top-k and top-p, with random draws that are a pure
// function of (seed, position) so that any request can be replayed or resumed mid-stream.
#ifndef YOCO_LIB_ENGINE_SAMPLER_H_
#define YOCO_LIB_ENGINE_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace yoco {

// Ids the reference never samples: BOS (0) and PAD (1) get −inf logits before the choice.
inline constexpr int32_t kBosId = 0;
inline constexpr int32_t kPadId = 1;
inline constexpr int32_t kEosId = 2;

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest most-likely set with mass >= top_p; 1: all
  uint64_t seed = 0;         // draws depend only on (seed, position)
  std::vector<int32_t> stop_token_ids;  // generation ends after emitting one of these

  // INVALID_ARGUMENT for NaN/negative temperature, top_k < 0, top_p outside (0, 1], or stop ids
  // outside [0, vocab_size).
  absl::Status Validate(int vocab_size) const;
  bool operator==(const SamplingParams&) const = default;
};

// Uniform draw in [0, 1) for the token at `position` of a request with `seed`.
double UniformDraw(uint64_t seed, int64_t position);

// Chooses the token at absolute `position` from `logits` [vocab]. Not thread-safe (scratch);
// one per thread.
class Sampler {
 public:
  int32_t Sample(const SamplingParams& params, absl::Span<const float> logits, int64_t position);

 private:
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SAMPLER_H_
