// Sampling. Candidates are ranked by (logit desc, id asc) so the choice is deterministic
// even with tied logits; top_k, then top_p, then min_p narrow them.
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

  order_.clear();
  for (int32_t i = 0; i < n; ++i) {
    // (An id an adjustment ruled out has a logit of -inf: never a candidate.)
    if (!Masked(i) && logits[i] > -INFINITY) order_.push_back(i);
  }
  if (order_.empty()) return 0;
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = order_.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), better);
    order_.resize(keep);
  } else {
    std::sort(order_.begin(), order_.end(), better);
  }

  // Softmax over the kept candidates at the temperature, in double.
  probs_.resize(keep);
  const double max_logit = logits[order_[0]];
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((static_cast<double>(logits[order_[i]]) - max_logit) / params.temperature);
    total += probs_[i];
  }
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs_[i] / total;
      if (mass >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = std::accumulate(probs_.begin(), probs_.begin() + keep, 0.0);
  }
  if (params.min_p > 0.0f) {
    // Candidates are sorted: those as likely as min_p times the first are a prefix.
    const double floor = probs_[0] * static_cast<double>(params.min_p);
    size_t cut = 1;
    while (cut < keep && probs_[cut] >= floor) ++cut;
    keep = cut;
    total = std::accumulate(probs_.begin(), probs_.begin() + keep, 0.0);
  }

  const double target = UniformDraw(params.seed, position) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace yoco
