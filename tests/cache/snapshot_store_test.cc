// SnapshotStore on synthetic states: exact restore, longest prefix, shared blocks, LRU under a
// budget, pinning, TTL and the miss reasons.
#include "lib/cache/snapshot_store.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/cache/snapshot_test_states.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

class SnapshotStoreTest : public ::testing::Test {
 protected:
  SnapshotStoreTest() : config_(testing::SmallConfig()) {}

  SequenceState State(int64_t n, uint32_t seed) { return testing::RandomState(config_, n, seed); }

  // The state truncated to its first `n` K/V rows (what a snapshot at n must restore, with the
  // self states it was saved with).
  SequenceState Prefix(const SequenceState& s, int64_t n) {
    SequenceState p = s;
    p.position = n;
    p.shared_k.Resize(n);
    p.shared_v.Resize(n);
    return p;
  }

  SnapshotStoreOptions Options(int64_t budget) {
    SnapshotStoreOptions o;
    o.budget_bytes = budget;
    o.now = [this] { return now_; };
    return o;
  }

  int64_t BlockBytes() const { return testing::SnapshotBlockBytes(config_); }
  int64_t StateBytes() const { return testing::SnapshotStateBytes(config_); }

  ModelConfig config_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(SnapshotStoreTest, RestoresExactlyAndPicksTheLongestPrefix) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(600, 96, 1);
  const auto keys = PrefixBlockKeys(1, "", tokens);  // 4 blocks
  const SequenceState at256 = State(256, 1), at512 = State(512, 2);
  ASSERT_TRUE(store.Insert(absl::MakeConstSpan(keys).subspan(0, 2), tokens, at256, {}).ok());
  ASSERT_TRUE(store.Insert(absl::MakeConstSpan(keys).subspan(0, 4), tokens, at512, {}).ok());

  SnapshotHit hit = store.Lookup(keys, tokens);
  EXPECT_EQ(hit.miss, CacheMiss::kHit);
  EXPECT_EQ(hit.tier, CacheTier::kMemory);
  ASSERT_EQ(hit.tokens, 512);
  // Rows [0, 256) came from the first insert (shared blocks); rows [256, 512) from the second.
  SequenceState expected = at512;
  for (auto [rows, first] : {std::pair{&expected.shared_k, &at256.shared_k},
                             std::pair{&expected.shared_v, &at256.shared_v}}) {
    *rows = KvRows(rows->dtype(), rows->width());
    rows->AppendRows(*first, 0, 256);
    rows->AppendRows(rows == &expected.shared_k ? at512.shared_k : at512.shared_v, 256, 256);
  }
  EXPECT_TRUE(hit.state == expected);

  hit = store.Lookup(absl::MakeConstSpan(keys).subspan(0, 3), tokens);  // at most 384 usable
  ASSERT_EQ(hit.tokens, 256);
  EXPECT_TRUE(hit.state == Prefix(at256, 256));
  EXPECT_EQ(store.stats().hits, 2u);
  EXPECT_EQ(store.stats().hit_tokens_memory, 768u);
}

// A hit references the stored K/V instead of copying it: every restore of a document, and the
// state it was saved from, read the same memory (a 1M-token document's hit copies no K/V).
TEST_F(SnapshotStoreTest, AHitSharesTheStoredKvInsteadOfCopyingIt) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(600, 96, 7);
  const auto keys = PrefixBlockKeys(1, "", tokens);  // 4 blocks
  const SequenceState saved = State(512, 7);
  ASSERT_TRUE(store.Insert(keys, tokens, saved, {}).ok());
  SnapshotHit first = store.Lookup(keys, tokens);
  const SnapshotHit second = store.Lookup(keys, tokens);
  ASSERT_EQ(first.tokens, 512);
  ASSERT_EQ(second.tokens, 512);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(first.state.shared_k.chunk_data(i), saved.shared_k.chunk_data(i));
    EXPECT_EQ(second.state.shared_k.chunk_data(i), saved.shared_k.chunk_data(i));
    EXPECT_EQ(second.state.shared_v.chunk_data(i), saved.shared_v.chunk_data(i));
  }
  // A sequence that goes on from a hit writes rows of its own, never into the shared ones.
  first.state.shared_k.Append(std::vector<float>(config_.kv_dim(), 1.0f).data(), 1);
  first.state.shared_k.mutable_chunk_data(0)[0] ^= 0xFF;
  EXPECT_TRUE(store.Lookup(keys, tokens).state == saved);
}

// A store of a bf16-K/V engine keeps bf16 blocks (half the K/V bytes of fp32), gives them back
// bit for bit, and refuses a state holding the other dtype.
TEST_F(SnapshotStoreTest, Bf16KvBlocksRoundTripAtHalfTheBytes) {
  const int64_t f32_block = BlockBytes();
  config_.kv_dtype = KvDtype::kBF16;
  EXPECT_EQ(f32_block - BlockBytes(), kCacheBlockTokens * 2 * config_.kv_dim() * 2);
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(300, 96, 4);
  const auto keys = PrefixBlockKeys(1, "", tokens);  // 2 blocks
  const SequenceState at256 = State(256, 4);
  ASSERT_EQ(at256.shared_k.dtype(), KvDtype::kBF16);
  ASSERT_TRUE(store.Insert(keys, tokens, at256, {}).ok());
  EXPECT_EQ(store.stats().bytes, 2 * BlockBytes() + StateBytes());
  const SnapshotHit hit = store.Lookup(keys, tokens);
  ASSERT_EQ(hit.tokens, 256);
  EXPECT_TRUE(hit.state == at256);

  ModelConfig f32_config = config_;
  f32_config.kv_dtype = KvDtype::kF32;
  const SequenceState f32_state = testing::RandomState(f32_config, 256, 5);
  const auto other_tokens = testing::RandomTokens(300, 96, 5);
  EXPECT_EQ(store.Insert(PrefixBlockKeys(1, "", other_tokens), other_tokens, f32_state, {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SnapshotStoreTest, SharesKvBlocksBetweenSnapshotsOfOnePrefix) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(512, 96, 2);
  const auto keys = PrefixBlockKeys(1, "", tokens);
  const SequenceState s = State(512, 3);
  ASSERT_TRUE(
      store.Insert(absl::MakeConstSpan(keys).subspan(0, 2), tokens, Prefix(s, 256), {}).ok());
  ASSERT_TRUE(store.Insert(keys, tokens, s, {}).ok());
  EXPECT_EQ(store.stats().bytes, 4 * BlockBytes() + 2 * StateBytes());
  ASSERT_TRUE(store.Evict(keys[3]));
  EXPECT_EQ(store.stats().bytes, 2 * BlockBytes() + StateBytes());  // the shared half stays
  ASSERT_EQ(store.Lookup(keys, tokens).tokens, 256);
  EXPECT_EQ(store.EvictAll(), 1u);
  EXPECT_EQ(store.stats().bytes, 0);
}

TEST_F(SnapshotStoreTest, TokensMustMatchNotOnlyTheKey) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(256, 96, 3);
  const auto keys = PrefixBlockKeys(1, "", tokens);
  ASSERT_TRUE(store.Insert(keys, tokens, State(256, 4), {}).ok());
  auto other = tokens;
  other[5] = other[5] == 10 ? 11 : 10;  // as if two prefixes collided on one key
  EXPECT_EQ(store.Lookup(keys, other).tokens, 0);
  EXPECT_EQ(store.Lookup(keys, tokens).tokens, 256);
}

TEST_F(SnapshotStoreTest, EvictsLeastRecentlyUsedWithinTheBudgetAndSaysWhy) {
  const int64_t one = BlockBytes() + StateBytes();  // a one-block snapshot
  SnapshotStore store(config_, Options(2 * one));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<BlockKey>> keys;
  for (uint32_t i = 0; i < 3; ++i) {
    prompts.push_back(testing::RandomTokens(128, 96, 10 + i));
    keys.push_back(PrefixBlockKeys(1, "", prompts.back()));
  }
  ASSERT_TRUE(store.Insert(keys[0], prompts[0], State(128, 1), {}).ok());
  ASSERT_TRUE(store.Insert(keys[1], prompts[1], State(128, 2), {}).ok());
  ASSERT_EQ(store.Lookup(keys[0], prompts[0]).tokens, 128);  // 0 is now more recent than 1
  const uint64_t generation = store.generation();
  ASSERT_TRUE(store.Insert(keys[2], prompts[2], State(128, 3), {}).ok());
  EXPECT_GT(store.generation(), generation);
  EXPECT_LE(store.stats().bytes, 2 * one);
  EXPECT_EQ(store.Lookup(keys[0], prompts[0]).tokens, 128);
  EXPECT_EQ(store.Lookup(keys[2], prompts[2]).tokens, 128);
  SnapshotHit miss = store.Lookup(keys[1], prompts[1]);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kEvicted);
  EXPECT_EQ(store.stats().evictions, 1u);
  const auto never = testing::RandomTokens(128, 96, 99);
  EXPECT_EQ(store.Lookup(PrefixBlockKeys(1, "", never), never).miss, CacheMiss::kNoSnapshot);
}

TEST_F(SnapshotStoreTest, PinnedSnapshotsStayAndBoundTheBudget) {
  const int64_t one = BlockBytes() + StateBytes();
  SnapshotStore store(config_, Options(2 * one));
  std::vector<std::vector<int32_t>> p;
  std::vector<std::vector<BlockKey>> k;
  for (uint32_t i = 0; i < 4; ++i) {
    p.push_back(testing::RandomTokens(128, 96, 20 + i));
    k.push_back(PrefixBlockKeys(1, "", p.back()));
  }
  SnapshotRetention pin;
  pin.pinned = true;
  ASSERT_TRUE(store.Insert(k[0], p[0], State(128, 1), pin).ok());
  ASSERT_TRUE(store.Insert(k[1], p[1], State(128, 2), {}).ok());
  ASSERT_TRUE(store.Insert(k[2], p[2], State(128, 3), {}).ok());  // evicts 1, not the pinned 0
  EXPECT_EQ(store.Lookup(k[0], p[0]).tokens, 128);
  EXPECT_EQ(store.Lookup(k[1], p[1]).tokens, 0);
  ASSERT_TRUE(store.Insert(k[2], p[2], State(128, 3), pin).ok());  // pins the existing one
  auto full = store.Insert(k[3], p[3], State(128, 4), pin);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_EQ(store.Lookup(k[0], p[0]).tokens, 128);
  EXPECT_EQ(store.Lookup(k[2], p[2]).tokens, 128);
  EXPECT_EQ(store.Lookup(k[3], p[3]).tokens, 0);
}

TEST_F(SnapshotStoreTest, ExpiresAfterItsTtl) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(128, 96, 5);
  const auto keys = PrefixBlockKeys(1, "", tokens);
  SnapshotRetention ttl;
  ttl.ttl = absl::Seconds(10);
  ASSERT_TRUE(store.Insert(keys, tokens, State(128, 1), ttl).ok());
  now_ += absl::Seconds(9);
  EXPECT_EQ(store.Lookup(keys, tokens).tokens, 128);
  ASSERT_TRUE(store.Insert(keys, tokens, State(128, 1), {}).ok());  // no TTL: keeps the expiry
  EXPECT_EQ(store.List().size(), 1u);
  now_ += absl::Seconds(2);
  SnapshotHit miss = store.Lookup(keys, tokens);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kExpired);
  EXPECT_TRUE(store.List().empty());
  EXPECT_EQ(store.stats().bytes, 0);
  EXPECT_EQ(store.stats().expirations, 1u);
}

TEST_F(SnapshotStoreTest, ExportThenImportElsewhereRestoresTheSame) {
  SnapshotStore source(config_, Options(int64_t{1} << 30)),
      target(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(300, 96, 7);
  const auto keys = PrefixBlockKeys(1, "", tokens);
  const SequenceState s = State(256, 7);
  SnapshotRetention pin;
  pin.pinned = true;
  ASSERT_TRUE(source.Insert(keys, tokens, s, pin).ok());
  auto file = source.Export(keys[1]);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->pinned);
  auto imported = target.Import(*file);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(imported->pinned);
  SnapshotHit hit = target.Lookup(keys, tokens);
  ASSERT_EQ(hit.tokens, 256);
  EXPECT_TRUE(hit.state == s);
  EXPECT_EQ(source.Export(keys[0]).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SnapshotStoreTest, RemembersTheLatestRemovalsEvenOfAKeyRemovedTwice) {
  SnapshotStoreOptions options = Options(int64_t{1} << 30);
  options.remembered_removals = 2;
  SnapshotStore store(config_, options);
  std::vector<std::vector<int32_t>> p;
  std::vector<std::vector<BlockKey>> k;
  for (uint32_t i = 0; i < 3; ++i) {
    p.push_back(testing::RandomTokens(128, 96, 50 + i));
    k.push_back(PrefixBlockKeys(1, "", p.back()));
  }
  auto insert = [&](int i) { ASSERT_TRUE(store.Insert(k[i], p[i], State(128, i), {}).ok()); };
  insert(0);
  ASSERT_TRUE(store.Evict(k[0][0]));  // removal 1: A
  insert(0);
  insert(1);
  ASSERT_TRUE(store.Evict(k[1][0]));  // removal 2: B
  ASSERT_TRUE(store.Evict(k[0][0]));  // removal 3: A again; the first A entry falls out
  EXPECT_EQ(store.Lookup(k[0], p[0]).miss, CacheMiss::kEvicted);
  EXPECT_EQ(store.Lookup(k[1], p[1]).miss, CacheMiss::kEvicted);
  insert(2);
  ASSERT_TRUE(store.Evict(k[2][0]));  // removal 4: C; B falls out, A (3) stays
  EXPECT_EQ(store.Lookup(k[0], p[0]).miss, CacheMiss::kEvicted);
  EXPECT_EQ(store.Lookup(k[1], p[1]).miss, CacheMiss::kNoSnapshot);
  EXPECT_EQ(store.Lookup(k[2], p[2]).miss, CacheMiss::kEvicted);
}

TEST_F(SnapshotStoreTest, RefusesStatesOffTheBlockGrid) {
  SnapshotStore store(config_, Options(int64_t{1} << 30));
  const auto tokens = testing::RandomTokens(200, 96, 6);
  const auto keys = PrefixBlockKeys(1, "", tokens);
  EXPECT_EQ(store.Insert(keys, tokens, State(200, 1), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace yoco
