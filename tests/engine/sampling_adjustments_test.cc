// The logit adjustments (logit_bias, penalties, min_tokens) against a reference written out id
// by id; min_p's candidates; and a generation that stops in one place and continues in another
// (a bundle, or a retry that prefills the tokens already sent) adjusting exactly as one that ran
// straight through.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/sampler.h"
#include "lib/engine/token_history.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

// Each id's adjustment as the SamplingParams comment states it, from plain lists.
std::vector<float> ReferenceAdjust(const SamplingParams& s, const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& generated,
                                   std::vector<float> logits) {
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    float& x = logits[id];
    for (const auto& [bias_id, bias] : s.logit_bias) {
      if (bias_id == id) x += bias;
    }
    const auto times = std::count(generated.begin(), generated.end(), id);
    const bool in_prompt = std::find(prompt.begin(), prompt.end(), id) != prompt.end();
    if (s.repetition_penalty != 1.0f && (in_prompt || times > 0)) {
      x = x > 0 ? x / s.repetition_penalty : x * s.repetition_penalty;
    }
    if (times > 0) {
      x -= s.frequency_penalty * static_cast<float>(times);
      x -= s.presence_penalty;
    }
    const bool stop = id == kEosId || std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(),
                                                id) != s.stop_token_ids.end();
    if (stop && static_cast<int32_t>(generated.size()) < s.min_tokens) x = -INFINITY;
  }
  return logits;
}

TEST(TokenHistoryTest, AdjustmentsMatchTheReferenceOnRandomHistories) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int vocab = 20 + static_cast<int>(rng() % 200);
    std::uniform_int_distribution<int32_t> id(0, vocab - 1);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = normal(rng);
    std::vector<int32_t> prompt(rng() % 30), generated(rng() % 30);
    for (int32_t& t : prompt) t = id(rng);
    for (int32_t& t : generated) t = id(rng);
    SamplingParams s;
    std::set<int32_t> biased;
    for (int i = 0; i < 4; ++i) biased.insert(id(rng));
    for (int32_t b : biased) s.logit_bias.push_back({b, normal(rng)});
    s.repetition_penalty = trial % 3 == 0 ? 1.0f : 0.5f + static_cast<float>(rng() % 20) / 10;
    s.frequency_penalty = static_cast<float>(static_cast<int>(rng() % 41) - 20) / 10;
    s.presence_penalty = static_cast<float>(static_cast<int>(rng() % 41) - 20) / 10;
    s.min_tokens = static_cast<int32_t>(rng() % 40);
    s.stop_token_ids = {id(rng)};
    ASSERT_TRUE(s.Validate(vocab).ok());
    const TokenHistory history(prompt, generated);
    std::vector<float> got = logits;
    history.Adjust(s, absl::MakeSpan(got));
    EXPECT_EQ(got, ReferenceAdjust(s, prompt, generated, logits)) << "trial " << trial;
    EXPECT_EQ(history.generated(), static_cast<int64_t>(generated.size()));
  }
}

TEST(SamplingParamsTest, AdjustmentsOutOfRangeAreRefused) {
  auto refused = [](auto change) {
    SamplingParams s;
    change(s);
    return s.Validate(100).code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](SamplingParams& s) { s.logit_bias = {{100, 1.0f}}; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.logit_bias = {{5, 1.0f}, {5, 2.0f}}; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.logit_bias = {{5, 101.0f}}; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.logit_bias = {{5, NAN}}; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.repetition_penalty = 0.0f; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.repetition_penalty = 11.0f; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.frequency_penalty = 2.5f; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.presence_penalty = -2.5f; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.presence_penalty = NAN; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.min_tokens = -1; }));
  EXPECT_TRUE(refused([](SamplingParams& s) { s.min_p = 1.5f; }));
  EXPECT_FALSE(refused([](SamplingParams& s) {
    s.logit_bias = {{3, -100.0f}, {99, 100.0f}};
    s.repetition_penalty = 10.0f;
    s.frequency_penalty = -2.0f;
    s.presence_penalty = 2.0f;
    s.min_p = 1.0f;
  }));
}

TEST(SamplerTest, MinPKeepsTheCandidatesNearTheMostLikely) {
  Sampler sampler;
  // Probabilities ∝ exp(logit): id 10 : 11 : 12 = 1 : e^-0.5 (0.61) : e^-1 (0.37).
  std::vector<float> logits(30, -20.0f);
  logits[10] = 5.0f;
  logits[11] = 4.5f;
  logits[12] = 4.0f;
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;
  std::set<int32_t> seen;
  for (int pos = 0; pos < 400; ++pos) seen.insert(sampler.Sample(p, logits, pos));
  EXPECT_EQ(seen, (std::set<int32_t>{10, 11}));
  p.min_p = 0.3f;
  seen.clear();
  for (int pos = 0; pos < 400; ++pos) seen.insert(sampler.Sample(p, logits, pos));
  EXPECT_EQ(seen, (std::set<int32_t>{10, 11, 12}));
  // An id ruled out (-inf) is never drawn, even when nothing else is left but masked ids.
  logits[11] = -INFINITY;
  seen.clear();
  for (int pos = 0; pos < 400; ++pos) seen.insert(sampler.Sample(p, logits, pos));
  EXPECT_EQ(seen.count(11), 0u);
}

class AdjustedGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 31, "adjusted_gret");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
  }
  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
};

TEST_F(AdjustedGenerationTest, MinTokensHoldsOffEosThatABiasPushes) {
  SamplingParams s;
  s.logit_bias = {{kEosId, 100.0f}};  // EOS whenever it may be drawn
  s.min_tokens = 5;
  const std::vector<int32_t> tokens =
      *Generate(*backend_, testing::RandomTokens(12, 96, 4), {20, s, /*stop_at_eos=*/true});
  ASSERT_EQ(tokens.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_NE(tokens[i], kEosId);
  EXPECT_EQ(tokens[5], kEosId);
}

// The reference loop straight through, against: a prefill whose state goes on in a bundle with
// the call's sampling and the history; and a retry prefilling the prompt plus the tokens sent.
TEST_F(AdjustedGenerationTest, StoppingAndContinuingElsewhereAdjustsAsStraightThrough) {
  SamplingParams s;
  s.temperature = 0.8f;
  s.seed = 17;
  s.logit_bias = {{7, 2.0f}, {40, -3.0f}};
  s.repetition_penalty = 1.3f;
  s.frequency_penalty = 0.7f;
  s.presence_penalty = 0.4f;
  s.min_tokens = 3;
  const std::vector<int32_t> prompt = testing::RandomTokens(30, 96, 9);
  const std::vector<int32_t> want = *Generate(*backend_, prompt, {24, s, false});
  ASSERT_EQ(want.size(), 24u);
  SamplingParams plain = s;  // what a bundle carries: none of the adjustments
  plain.logit_bias.clear();
  plain.repetition_penalty = 1.0f;
  plain.frequency_penalty = plain.presence_penalty = 0.0f;
  plain.min_tokens = 0;
  EXPECT_NE(*Generate(*backend_, prompt, {24, plain, false}), want);  // they matter here

  int32_t first = -1;
  absl::StatusOr<Generation> prefilled = Generation::Prefill(*backend_, prompt, s, &first);
  ASSERT_TRUE(prefilled.ok());
  StateBundle bundle = prefilled->ToBundle(0);
  bundle.sampling = plain;
  absl::StatusOr<Generation> resumed = Generation::FromBundle(std::move(bundle));
  ASSERT_TRUE(resumed.ok());
  resumed->set_sampling(s);
  resumed->set_history(TokenHistory(prompt, {first}));
  std::vector<int32_t> got = {first};
  while (got.size() < want.size()) got.push_back(*resumed->Next(*backend_));
  EXPECT_EQ(got, want);

  // A retry after 9 tokens: the prompt plus those, 9 of it generated.
  std::vector<int32_t> input = prompt;
  input.insert(input.end(), want.begin(), want.begin() + 9);
  PrefillOptions options;
  options.generated_tail = 9;
  absl::StatusOr<Generation> retried = Generation::Prefill(*backend_, input, s, &first, options);
  ASSERT_TRUE(retried.ok());
  std::vector<int32_t> rest = {first};
  while (rest.size() < want.size() - 9) rest.push_back(*retried->Next(*backend_));
  EXPECT_EQ(rest, std::vector<int32_t>(want.begin() + 9, want.end()));

  options.generated_tail = static_cast<int64_t>(input.size());
  EXPECT_EQ(Generation::Prefill(*backend_, input, s, &first, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace yoco
