// The mixed load the determinism and burst tests send: every other request greedy, the rest
// sampled at temperature 0.9, top-k 50, top-p 0.95 with their own seeds; prompts of 20 to 200
// tokens, the same on every run.
#ifndef YOCO_TESTS_CLUSTER_CONCURRENT_REQUESTS_H_
#define YOCO_TESTS_CLUSTER_CONCURRENT_REQUESTS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "lib/engine/generation.h"

namespace yoco::testing {

struct MixedRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
};

inline std::vector<MixedRequest> MixedRequests(int count) {
  std::mt19937 rng(20261204);
  std::vector<MixedRequest> requests(count);
  for (int i = 0; i < count; ++i) {
    MixedRequest& r = requests[i];
    r.prompt.push_back(0);
    const int n = 20 + static_cast<int>(rng() % 181);
    for (int t = 1; t < n; ++t) r.prompt.push_back(4 + static_cast<int32_t>(rng() % 508));
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 50;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 1000 + i;
    }
  }
  return requests;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_CLUSTER_CONCURRENT_REQUESTS_H_
