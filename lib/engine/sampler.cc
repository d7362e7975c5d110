// Sampling. Candidates are ranked by (logit desc, id asc), so the kept set is one even with tied
// logits; top_k, then top_p, then min_p narrow it, and the draw walks it in id order.
#include "lib/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace yoco {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool Masked(int32_t id) { return id == kBosId || id == kPadId; }

}  // namespace

double UniformDraw(uint64_t seed, int64_t position) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(position));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t Sampler::Sample(const SamplingParams& params, absl::Span<const float> logits,
                        int64_t position) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (params.temperature <= 0.0f) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; ++i) {
      if (Masked(i)) continue;
      if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return best < 0 ? 0 : best;
  }

  kept_.clear();
  float max_logit = -INFINITY;
  for (int32_t i = 0; i < n; ++i) {
    // (An id an adjustment ruled out has a logit of -inf: never a candidate.)
    if (Masked(i) || !(logits[i] > -INFINITY)) continue;
    kept_.push_back(i);
    max_logit = std::max(max_logit, logits[i]);
  }
  if (kept_.empty()) return 0;
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < kept_.size()) {
    std::nth_element(kept_.begin(), kept_.begin() + (params.top_k - 1), kept_.end(), better);
    kept_.resize(params.top_k);
    std::sort(kept_.begin(), kept_.end());
  }
  // Each candidate's weight at the temperature, relative to the most likely one, in double.
  weights_.resize(logits.size());
  for (int32_t id : kept_) {
    weights_[id] = std::exp((static_cast<double>(logits[id]) - max_logit) / params.temperature);
  }
  if (params.top_p < 1.0f) {
    double total = 0.0;
    for (int32_t id : kept_) total += weights_[id];
    // The nucleus is a prefix of the candidates by rank: rank only as deep as its mass needs,
    // 4x deeper each time (a trained model's nucleus is tens of tokens).
    double mass = 0.0;
    size_t ranked = 0;
    while (ranked < kept_.size() && mass < params.top_p) {
      const size_t depth = std::min(std::max<size_t>(64, ranked * 4), kept_.size());
      std::nth_element(kept_.begin() + ranked, kept_.begin() + (depth - 1), kept_.end(), better);
      std::sort(kept_.begin() + ranked, kept_.begin() + depth, better);
      while (ranked < depth && mass < params.top_p) mass += weights_[kept_[ranked++]] / total;
    }
    kept_.resize(ranked);
    std::sort(kept_.begin(), kept_.end());
  }
  if (params.min_p > 0.0f) {
    // At least min_p times as likely as the most likely candidate (which weighs 1).
    const double floor = static_cast<double>(params.min_p);
    kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                               [&](int32_t id) { return weights_[id] < floor; }),
                kept_.end());
  }

  // The draw walks the kept candidates in id order: one pass, no sort of the vocabulary.
  double total = 0.0;
  for (int32_t id : kept_) total += weights_[id];
  const double target = UniformDraw(params.seed, position) * total;
  double cumulative = 0.0;
  for (int32_t id : kept_) {
    cumulative += weights_[id];
    if (target < cumulative) return id;
  }
  return kept_.back();
}

}  // namespace yoco
