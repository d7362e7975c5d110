// Token sampling: greedy, temperature, top-k, top-p and min-p, with random draws that are a pure
// function of (seed, position) so that any request can be replayed or resumed mid-stream.
#ifndef YOCO_LIB_ENGINE_SAMPLER_H_
#define YOCO_LIB_ENGINE_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "lib/model/sampling_params.h"

namespace yoco {

// Uniform draw in [0, 1) for the token at `position` of a request with `seed`.
double UniformDraw(uint64_t seed, int64_t position);

// Chooses the token at absolute `position` from `logits` [vocab]. Not thread-safe (scratch);
// one per thread.
class Sampler {
 public:
  int32_t Sample(const SamplingParams& params, absl::Span<const float> logits, int64_t position);

 private:
  std::vector<int32_t> kept_;    // the candidates, in id order between the steps
  std::vector<double> weights_;  // by id; set for the candidates
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SAMPLER_H_
