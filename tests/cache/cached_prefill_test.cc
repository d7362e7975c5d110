// CachedPrefill: a hit computes bit for bit what a miss computes (same state, same first token,
// same continuation), for a full hit, a partial hit and a hit followed by more document text,
// greedy and seeded sampling, with gated retention and with sliding-window self-attention.
#include "lib/cache/cached_prefill.h"

#include <gtest/gtest.h>

#include "lib/engine/cpu_backend.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

class CachedPrefillTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const bool swa = GetParam();
    model_ = testing::MakeModel(testing::SmallConfig(swa ? std::optional<int>(16) : std::nullopt),
                                swa ? 21 : 22, swa ? "cache_swa" : "cache_gret");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
    store_ = std::make_unique<SnapshotStore>(model_->config(), SnapshotStoreOptions{});
  }

  std::vector<int32_t> Tokens(int n, uint32_t seed) {
    return testing::RandomTokens(n, model_->config().vocab_size, seed);
  }

  CachedPrefillResult Run(const std::vector<int32_t>& prompt, SnapshotStore* store,
                          SamplingParams sampling = {}, SnapshotPolicy policy = {}) {
    CachedPrefillRequest request;
    request.prompt = prompt;
    request.sampling = sampling;
    request.policy = policy;
    auto result = CachedPrefill(*backend_, store, request);
    EXPECT_TRUE(result.ok()) << result.status();
    return std::move(*result);
  }

  // The first token and the next `n` tokens of a generation.
  std::vector<int32_t> Continue(CachedPrefillResult& r, int n) {
    std::vector<int32_t> out = {r.first_token};
    for (int i = 0; i < n; ++i) {
      auto t = r.generation.Next(*backend_);
      EXPECT_TRUE(t.ok());
      out.push_back(*t);
    }
    return out;
  }

  // Runs `prompt` uncached and through the store, and checks that they agree exactly.
  void ExpectHitEqualsMiss(const std::vector<int32_t>& prompt, int64_t expected_cached,
                           SamplingParams sampling = {}) {
    CachedPrefillResult uncached = Run(prompt, nullptr, sampling);
    CachedPrefillResult cached = Run(prompt, store_.get(), sampling);
    EXPECT_EQ(cached.cached_tokens, expected_cached);
    EXPECT_EQ(cached.miss, expected_cached > 0 ? CacheMiss::kHit : CacheMiss::kNoSnapshot);
    EXPECT_TRUE(cached.generation.state() == uncached.generation.state())
        << "the restored prefill differs from the uncached one";
    EXPECT_EQ(Continue(cached, 6), Continue(uncached, 6));
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<SnapshotStore> store_;
};

TEST_P(CachedPrefillTest, FullHitGivesTheMissExactly) {
  const auto prompt = Tokens(300, 1);
  CachedPrefillResult first = Run(prompt, store_.get());
  EXPECT_EQ(first.cached_tokens, 0);
  ASSERT_TRUE(first.last_block_snapshot.has_value());
  EXPECT_EQ(first.last_block_snapshot->tokens, 256);
  ExpectHitEqualsMiss(prompt, 256);
}

TEST_P(CachedPrefillTest, PartialHitGivesTheMissExactly) {
  SnapshotPolicy every_block;
  every_block.every_blocks = 1;
  Run(Tokens(600, 2), store_.get(), {}, every_block);
  auto prompt = Tokens(600, 2);
  for (int i = 300; i < 600; ++i) prompt[i] = Tokens(600, 3)[i];  // shares blocks 0 and 1
  ExpectHitEqualsMiss(prompt, 256);
}

TEST_P(CachedPrefillTest, DocumentThenQuestionGivesTheMissExactly) {
  const auto document = Tokens(400, 4);
  SnapshotPolicy pin;
  pin.last_block_retention.pinned = true;
  CachedPrefillResult doc = Run(document, store_.get(), {}, pin);
  ASSERT_TRUE(doc.last_block_snapshot.has_value());
  EXPECT_TRUE(doc.last_block_snapshot->pinned);
  auto prompt = document;
  const auto question = Tokens(40, 5);
  prompt.insert(prompt.end(), question.begin() + 1, question.end());
  ExpectHitEqualsMiss(prompt, 384);
  // More document text after the cached part, then the question.
  auto longer = document;
  const auto more = Tokens(200, 6);
  longer.insert(longer.end(), more.begin() + 1, more.end());
  longer.insert(longer.end(), question.begin() + 1, question.end());
  ExpectHitEqualsMiss(longer, 384);
}

TEST_P(CachedPrefillTest, SeededSamplingHitGivesTheMissExactly) {
  SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_p = 0.95f;
  sampling.seed = 1234;
  const auto prompt = Tokens(270, 7);
  Run(prompt, store_.get(), sampling);
  ExpectHitEqualsMiss(prompt, 256, sampling);
}

TEST_P(CachedPrefillTest, SaltsKeepTenantsApart) {
  const auto prompt = Tokens(300, 8);
  Run(prompt, store_.get());
  CachedPrefillRequest request;
  request.prompt = prompt;
  request.salt = "tenant-b";
  auto other = CachedPrefill(*backend_, store_.get(), request);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->cached_tokens, 0);
}

TEST_P(CachedPrefillTest, CancelledStopsBeforeTheNextSegment) {
  const auto prompt = Tokens(600, 9);
  CachedPrefillRequest request;
  request.prompt = prompt;
  int calls = 0;
  request.cancelled = [&] { return ++calls > 2; };
  auto result = CachedPrefill(*backend_, store_.get(), request);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
}

INSTANTIATE_TEST_SUITE_P(SelfAttention, CachedPrefillTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Swa" : "Gret"; });

}  // namespace
}  // namespace yoco
