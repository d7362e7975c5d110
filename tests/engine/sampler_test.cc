// Sampling: greedy masks BOS/PAD, draws depend only on (seed, position), top-k/top-p restrict
// the candidates, and the empirical distribution matches the softmax.
#include "lib/engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
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
