// Choices (SamplingParams' n > 1): each choice's first token, drawn from one prefill's logits,
// is the first token of a one-choice prefill with that choice's seed; and a generation that
// replays tokens the client has already goes on exactly as the run that drew them.
#include <gtest/gtest.h>

#include <set>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

class ChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 41, "choices_gret");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
  }
  // Sampling with every part that a choice's draw must honour: temperature, top_p, the logit
  // adjustments (whose history is the prompt's) and logprobs.
  static SamplingParams Sampling(uint64_t seed) {
    SamplingParams s;
    s.temperature = 1.1f;
    s.top_p = 0.97f;
    s.seed = seed;
    s.logit_bias = {{5, 1.5f}, {60, -2.0f}};
    s.repetition_penalty = 1.2f;
    s.presence_penalty = 0.3f;
    s.logprobs = 3;
    return s;
  }
  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
};

TEST(ChoiceSeedTest, ChoiceZeroKeepsTheSeedAndOthersDiffer) {
  for (uint64_t seed : {0ull, 1ull, 42ull, ~0ull}) {
    EXPECT_EQ(ChoiceSeed(seed, 0), seed);
    std::set<uint64_t> seeds;
    for (uint32_t c = 0; c < 64; ++c) seeds.insert(ChoiceSeed(seed, c));
    EXPECT_EQ(seeds.size(), 64u) << seed;
  }
  EXPECT_NE(ChoiceSeed(1, 1), ChoiceSeed(2, 1));
}

TEST_F(ChoicesTest, EachChoiceDrawsAsAOneChoicePrefillOfItsSeed) {
  const std::vector<int32_t> prompt = testing::RandomTokens(70, 96, 5);
  const SamplingParams s = Sampling(1234);
  int32_t first = -1;
  absl::StatusOr<Generation> prefilled = Generation::Prefill(*backend_, prompt, s, &first);
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  const std::vector<uint32_t> choices = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const std::vector<ChoiceDraw> draws = prefilled->DrawChoices(choices);
  ASSERT_EQ(draws.size(), choices.size());
  EXPECT_EQ(draws[0].token, first);
  std::set<int32_t> distinct;
  for (size_t i = 0; i < choices.size(); ++i) {
    SamplingParams alone = s;
    alone.seed = ChoiceSeed(s.seed, choices[i]);
    int32_t want = -1;
    absl::StatusOr<Generation> one = Generation::Prefill(*backend_, prompt, alone, &want);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(draws[i].choice, choices[i]);
    EXPECT_EQ(draws[i].token, want) << "choice " << choices[i];
    ASSERT_TRUE(draws[i].logprobs.has_value());
    EXPECT_EQ(draws[i].logprobs->chosen.id, want);
    EXPECT_EQ(draws[i].logprobs->chosen.logprob, one->pending_logprobs()->chosen.logprob);
    EXPECT_EQ(draws[i].logprobs->top.size(), 3u);
    distinct.insert(draws[i].token);
  }
  EXPECT_GT(distinct.size(), 1u) << "16 choices at temperature 1.1 all drew one token";
}

TEST_F(ChoicesTest, ReplayingSentTokensGoesOnAsTheRunThatDrewThem) {
  const std::vector<int32_t> prompt = testing::RandomTokens(40, 96, 8);
  SamplingParams s = Sampling(ChoiceSeed(99, 3));
  s.logprobs = -1;
  const std::vector<int32_t> want = *Generate(*backend_, prompt, {20, s, false});
  ASSERT_EQ(want.size(), 20u);

  // The decode worker's side of a retry: the prompt's state, the first sent token pending, the
  // next eight replayed.
  int32_t first = -1;
  absl::StatusOr<Generation> prefilled = Generation::Prefill(*backend_, prompt, s, &first);
  ASSERT_TRUE(prefilled.ok());
  ASSERT_EQ(first, want[0]);
  StateBundle bundle = prefilled->ToBundle(0);
  bundle.pending_token = want[0];
  absl::StatusOr<Generation> resumed = Generation::FromBundle(std::move(bundle));
  ASSERT_TRUE(resumed.ok());
  resumed->set_history(TokenHistory(prompt, {want[0]}));
  resumed->set_replay({want.begin() + 1, want.begin() + 9});
  EXPECT_EQ(resumed->replay_left(), 8);
  std::vector<int32_t> got = {want[0]};
  for (int step = 0; step < 19; ++step) {
    const int32_t token = *resumed->Next(*backend_);
    EXPECT_EQ(resumed->replayed(), step < 8) << step;
    got.push_back(token);
  }
  EXPECT_EQ(resumed->replay_left(), 0);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace yoco
