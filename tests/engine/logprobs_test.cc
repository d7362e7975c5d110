// Log-probabilities: LogprobsOf against a long-double log-softmax on random logits (the top ids
// ranked like the sampler's candidates), and a generation's reported logprobs against the
// log-softmax of the full forward pass's logits at each position, prefill's first token and
// every decode step alike.
#include "lib/engine/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/prompt_scoring.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

// The obvious way, in long double.
std::vector<long double> ReferenceLogSoftmax(const std::vector<float>& logits) {
  long double total = 0;
  for (float x : logits) total += std::exp(static_cast<long double>(x));
  std::vector<long double> out;
  for (float x : logits) out.push_back(static_cast<long double>(x) - std::log(total));
  return out;
}

// The ids ranked as the sampler ranks candidates: logit descending, then id ascending.
std::vector<int32_t> Ranked(const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return ids;
}

void ExpectClose(float got, long double want) {
  EXPECT_NEAR(got, static_cast<double>(want), 1e-6 * std::max(1.0L, std::fabs(want)));
}

TEST(LogprobsOfTest, MatchesALongDoubleLogSoftmaxOnRandomLogits) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = 1 + static_cast<int>(rng() % 3000);
    const float scale = std::pow(10.0f, static_cast<float>(trial % 5) - 1);  // 0.1 .. 1000
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = normal(rng) + 30.0f;  // an offset the max must remove
    const int32_t token = static_cast<int32_t>(rng() % vocab);
    const int top_n = static_cast<int>(rng() % (kMaxTopLogprobs + 1));
    const TokenLogprobs got = LogprobsOf(logits, token, top_n);
    const std::vector<long double> want = ReferenceLogSoftmax(logits);
    const std::vector<int32_t> ranked = Ranked(logits);
    EXPECT_EQ(got.chosen.id, token);
    ExpectClose(got.chosen.logprob, want[token]);
    ASSERT_EQ(got.top.size(), static_cast<size_t>(std::min(top_n, vocab))) << "trial " << trial;
    for (size_t i = 0; i < got.top.size(); ++i) {
      EXPECT_EQ(got.top[i].id, ranked[i]) << "trial " << trial << " rank " << i;
      ExpectClose(got.top[i].logprob, want[ranked[i]]);
    }
  }
}

TEST(LogprobsOfTest, TiesRankTheLowerIdFirstAndTheSumIsOne) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprobs got = LogprobsOf(logits, 3, 4);
  ASSERT_EQ(got.top.size(), 4u);
  EXPECT_EQ(got.top[0].id, 1);
  EXPECT_EQ(got.top[1].id, 2);
  EXPECT_EQ(got.top[2].id, 4);
  EXPECT_EQ(got.top[3].id, 0);
  EXPECT_EQ(got.top[0].logprob, got.top[2].logprob);
  double mass = 0;
  for (int32_t id = 0; id < 6; ++id) mass += std::exp(LogprobsOf(logits, id, 0).chosen.logprob);
  EXPECT_NEAR(mass, 1.0, 1e-6);
  EXPECT_TRUE(LogprobsOf(logits, 3, 0).top.empty());
  EXPECT_EQ(LogprobsOf(logits, 3, 20).top.size(), 6u);  // no more than the vocabulary
}

class GenerationLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 21, "logprobs_gret");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
  }

  // The full forward pass's logits at the last position of `tokens`.
  std::vector<float> LastLogits(const std::vector<int32_t>& tokens) {
    SequenceState state = SequenceState::Create(model_->config());
    ForwardSegment seg{&state, tokens, LogitsMode::kAll};
    std::vector<float> logits;
    EXPECT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
    const int V = model_->config().vocab_size;
    return std::vector<float>(logits.end() - V, logits.end());
  }

  // Each reported logprob is the log-softmax of the full pass at its position; floating-point
  // sums in the prefill and decode paths may differ from it in the last bits.
  void ExpectMatchesFullPass(const std::vector<int32_t>& sequence, const TokenLogprobs& got,
                             int top_n) {
    const std::vector<float> logits = LastLogits(sequence);
    const std::vector<long double> want = ReferenceLogSoftmax(logits);
    EXPECT_NEAR(got.chosen.logprob, static_cast<double>(want[got.chosen.id]), 2e-4);
    ASSERT_EQ(got.top.size(), static_cast<size_t>(top_n));
    for (size_t i = 0; i < got.top.size(); ++i) {
      EXPECT_NEAR(got.top[i].logprob, static_cast<double>(want[got.top[i].id]), 2e-4);
      if (i > 0) EXPECT_GE(got.top[i - 1].logprob, got.top[i].logprob);
    }
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
};

TEST_F(GenerationLogprobsTest, PrefillAndEveryDecodeStepReportTheFullPassLogSoftmax) {
  const std::vector<int32_t> prompt = testing::RandomTokens(37, 96, 5);
  SamplingParams sampling;
  sampling.temperature = 0.9f;  // logprobs are the raw model's: the temperature does not enter
  sampling.seed = 3;
  sampling.logprobs = 5;
  int32_t first = -1;
  absl::StatusOr<Generation> gen = Generation::Prefill(*backend_, prompt, sampling, &first);
  ASSERT_TRUE(gen.ok()) << gen.status();
  std::vector<int32_t> sequence = prompt;
  ASSERT_TRUE(gen->pending_logprobs().has_value());
  EXPECT_EQ(gen->pending_logprobs()->chosen.id, first);
  ExpectMatchesFullPass(sequence, *gen->pending_logprobs(), 5);
  sequence.push_back(first);

  // Continued elsewhere from a bundle, which does not carry the setting: the call says it again.
  absl::StatusOr<Generation> resumed = Generation::FromBundle(gen->ToBundle(0));
  ASSERT_TRUE(resumed.ok());
  resumed->set_logprobs(3);
  for (int step = 0; step < 6; ++step) {
    absl::StatusOr<int32_t> next = resumed->Next(*backend_);
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(resumed->pending_logprobs().has_value());
    EXPECT_EQ(resumed->pending_logprobs()->chosen.id, *next);
    ExpectMatchesFullPass(sequence, *resumed->pending_logprobs(), 3);
    sequence.push_back(*next);
  }
}

TEST_F(GenerationLogprobsTest, GreedyPicksTheTopLogprobAndNoneAreKeptUnlessAsked) {
  const std::vector<int32_t> prompt = testing::RandomTokens(20, 96, 8);
  SamplingParams sampling;
  sampling.logprobs = 1;
  int32_t first = -1;
  absl::StatusOr<Generation> gen = Generation::Prefill(*backend_, prompt, sampling, &first);
  ASSERT_TRUE(gen.ok());
  ASSERT_TRUE(gen->pending_logprobs().has_value());
  // BOS and PAD are never drawn, so greedy is the top one unless one of those leads.
  if (gen->pending_logprobs()->top[0].id > kPadId) {
    EXPECT_EQ(gen->pending_logprobs()->top[0], gen->pending_logprobs()->chosen);
  }
  gen->set_logprobs(-1);
  ASSERT_TRUE(gen->Next(*backend_).ok());
  EXPECT_FALSE(gen->pending_logprobs().has_value());

  sampling.logprobs = 21;
  EXPECT_EQ(Generation::Prefill(*backend_, prompt, sampling, &first).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Every prompt token's logprob given those before it: the full pass's log-softmax at the
// position before it, however the prompt is cut into segments.
TEST_F(GenerationLogprobsTest, ScoringAPromptGivesEachTokensFullPassLogSoftmax) {
  const std::vector<int32_t> prompt = testing::RandomTokens(45, 96, 13);
  SequenceState state = SequenceState::Create(model_->config());
  ForwardSegment seg{&state, prompt, LogitsMode::kAll};
  std::vector<float> all;
  ASSERT_TRUE(backend_->Forward({&seg, 1}, &all).ok());
  const int V = model_->config().vocab_size;
  for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
    SCOPED_TRACE(rows);
    ScoreOptions options;
    options.top_logprobs = 3;
    options.logits_floats = rows * V;
    absl::StatusOr<std::vector<TokenLogprobs>> scored = ScorePrompt(*backend_, prompt, options);
    ASSERT_TRUE(scored.ok()) << scored.status();
    ASSERT_EQ(scored->size(), prompt.size() - 1);
    for (size_t i = 1; i < prompt.size(); ++i) {
      const std::vector<float> row(all.begin() + (i - 1) * V, all.begin() + i * V);
      const std::vector<long double> want = ReferenceLogSoftmax(row);
      const TokenLogprobs& got = (*scored)[i - 1];
      EXPECT_EQ(got.chosen.id, prompt[i]);
      EXPECT_NEAR(got.chosen.logprob, static_cast<double>(want[prompt[i]]), 2e-4) << i;
      ASSERT_EQ(got.top.size(), 3u);
      EXPECT_NEAR(got.top[0].logprob,
                  static_cast<double>(*std::max_element(want.begin(), want.end())), 2e-4);
    }
  }
}

TEST_F(GenerationLogprobsTest, ScoringRefusesBadInputAndStopsWhenCancelled) {
  ScoreOptions options;
  EXPECT_EQ(ScorePrompt(*backend_, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> outside = {0, 5, 96};
  EXPECT_EQ(ScorePrompt(*backend_, outside, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(ScorePrompt(*backend_, {0, 5}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.top_logprobs = 0;
  absl::StatusOr<std::vector<TokenLogprobs>> one = ScorePrompt(*backend_, {0}, options);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->empty());  // BOS alone: nothing to score
  options.cancelled = [] { return true; };
  EXPECT_EQ(ScorePrompt(*backend_, {0, 5, 6}, options).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace yoco
