// Sampling: greedy masks BOS/PAD, draws depend only on (seed, position), top-k/top-p restrict
// the candidates, and the empirical distribution matches the softmax.
#include "lib/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace yoco {
namespace {

TEST(SamplerTest, GreedyMasksBosAndPadAndPrefersLowestIdOnTies) {
  Sampler s;
  std::vector<float> logits = {9.0f, 8.0f, 1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.Sample(SamplingParams{}, logits, 0), 3);
}

TEST(SamplerTest, SameSeedAndPositionGiveSameToken) {
  Sampler s;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 1234;
  std::vector<int32_t> first, second;
  for (int pos = 0; pos < 200; ++pos) first.push_back(s.Sample(p, logits, pos));
  for (int pos = 0; pos < 200; ++pos) second.push_back(s.Sample(p, logits, pos));
  EXPECT_EQ(first, second);
  // Another seed gives another sequence; the positions are not all the same draw.
  p.seed = 1235;
  std::vector<int32_t> other;
  for (int pos = 0; pos < 200; ++pos) other.push_back(s.Sample(p, logits, pos));
  EXPECT_NE(first, other);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 10u);
}

TEST(SamplerTest, TopKAndTopPRestrictCandidates) {
  Sampler s;
  // Probabilities at temperature 1 ∝ exp(logit): ids 10, 11, 12 dominate.
  std::vector<float> logits(40, 0.0f);
  logits[10] = 5.0f;
  logits[11] = 4.5f;
  logits[12] = 4.0f;
  logits[0] = 50.0f;  // BOS is masked even when it is the most likely
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  std::set<int32_t> seen;
  for (int pos = 0; pos < 500; ++pos) seen.insert(s.Sample(p, logits, pos));
  EXPECT_EQ(seen, (std::set<int32_t>{10, 11}));

  p.top_k = 0;
  p.top_p = 0.3f;  // id 10 alone has ~43% of the mass
  seen.clear();
  for (int pos = 0; pos < 500; ++pos) seen.insert(s.Sample(p, logits, pos));
  EXPECT_EQ(seen, (std::set<int32_t>{10}));
}

TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  Sampler s;
  const std::vector<float> logits = {0.0f, 0.0f, 1.0f, 0.5f, -1.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  p.seed = 99;
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int pos = 0; pos < n; ++pos) ++counts[s.Sample(p, logits, pos)];
  double z = 0;
  for (int i = 2; i < 6; ++i) z += std::exp(logits[i] / 0.7);
  for (int i = 2; i < 6; ++i) {
    const double expected = std::exp(logits[i] / 0.7) / z;
    const double sigma = std::sqrt(expected * (1 - expected) / n);
    EXPECT_NEAR(counts[i] / static_cast<double>(n), expected, 5 * sigma) << "id " << i;
  }
  EXPECT_EQ(counts.count(0) + counts.count(1), 0u);
}

// The rule as written: rank every candidate, keep the top_k, the smallest prefix with top_p of
// their mass, those at least min_p times as likely as the first; draw over the kept in id order.
int32_t ReferenceSample(const SamplingParams& p, const std::vector<float>& logits,
                        int64_t position) {
  std::vector<int32_t> ranked;
  for (int32_t i = 2; i < static_cast<int32_t>(logits.size()); ++i) {
    if (logits[i] > -INFINITY) ranked.push_back(i);
  }
  if (ranked.empty()) return 0;
  std::sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double top = logits[ranked[0]];
  auto weight = [&](int32_t id) { return std::exp((logits[id] - top) / p.temperature); };
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ranked.size()) ranked.resize(p.top_k);
  if (p.top_p < 1.0f) {
    std::vector<int32_t> by_id = ranked;
    std::sort(by_id.begin(), by_id.end());
    double total = 0.0;
    for (int32_t id : by_id) total += weight(id);
    double mass = 0.0;
    size_t cut = 0;
    while (cut < ranked.size() && mass < p.top_p) mass += weight(ranked[cut++]) / total;
    ranked.resize(cut);
  }
  std::vector<int32_t> kept;
  for (int32_t id : ranked) {
    if (weight(id) >= p.min_p) kept.push_back(id);
  }
  std::sort(kept.begin(), kept.end());
  double total = 0.0;
  for (int32_t id : kept) total += weight(id);
  const double target = UniformDraw(p.seed, position) * total;
  double cumulative = 0.0;
  for (int32_t id : kept) {
    cumulative += weight(id);
    if (target < cumulative) return id;
  }
  return kept.back();
}

TEST(SamplerTest, DrawsEqualTheRuleAsWrittenOnRandomLogits) {
  std::mt19937 rng(21);
  Sampler s;
  std::map<int32_t, int> per_vocabulary;
  for (int trial = 0; trial < 400; ++trial) {
    const int32_t vocabulary = 3 + static_cast<int32_t>(rng() % (trial % 10 == 0 ? 5000 : 300));
    std::vector<float> logits(vocabulary);
    const int spread = 1 + static_cast<int>(rng() % 30);
    for (float& l : logits) {
      l = rng() % 8 == 0 ? -INFINITY : static_cast<float>(rng() % (spread * 10)) / 10.0f;
    }
    SamplingParams p;
    p.temperature = 0.2f + static_cast<float>(rng() % 20) / 10.0f;
    p.seed = rng();
    if (rng() % 3 == 0) p.top_k = 1 + static_cast<int32_t>(rng() % 400);
    if (rng() % 2 == 0) p.top_p = 0.05f + static_cast<float>(rng() % 95) / 100.0f;
    if (rng() % 3 == 0) p.min_p = static_cast<float>(rng() % 50) / 100.0f;
    for (int64_t position = 0; position < 20; ++position) {
      ASSERT_EQ(s.Sample(p, logits, position), ReferenceSample(p, logits, position))
          << "trial " << trial << " position " << position;
    }
  }
}

TEST(SamplerTest, ValidateRejectsAbsurdValues) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate(100).ok());
  p.temperature = -1.0f;
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
  p.temperature = NAN;
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
  p = {};
  p.top_p = 0.0f;
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
  p.top_p = 1.5f;
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
  p = {};
  p.top_k = -3;
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
  p = {};
  p.stop_token_ids = {100};
  EXPECT_EQ(p.Validate(100).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StopAfterTest, AStopIdWinsOverEosAndEosStopsOnlyWhenAsked) {
  SamplingParams p;
  p.stop_token_ids = {7, kEosId};
  EXPECT_EQ(StopAfter(p, /*stop_at_eos=*/false, 7), TokenStop::kStopToken);
  EXPECT_EQ(StopAfter(p, /*stop_at_eos=*/true, kEosId), TokenStop::kStopToken);
  p.stop_token_ids = {7};
  EXPECT_EQ(StopAfter(p, /*stop_at_eos=*/true, kEosId), TokenStop::kEos);
  EXPECT_EQ(StopAfter(p, /*stop_at_eos=*/false, kEosId), TokenStop::kNone);
  for (int32_t id : {0, 1, 3, 6, 8, 1000}) {
    EXPECT_EQ(StopAfter(p, /*stop_at_eos=*/true, id), TokenStop::kNone) << id;
  }
}

}  // namespace
}  // namespace yoco
