// Named bundles and ResidentKv: a bundle that leaves out chunks its receiver holds is that much
// shorter, and the receiver rebuilds exactly the state that was sent; a chunk not held is
// NOT_FOUND; idle chunks go least recently used first beyond the budget, chunks in use never.
#include "lib/cache/resident_kv.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/checksum/crc32c.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

constexpr int64_t C = KvRows::kChunkRows;

class ResidentKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 23, "resident_kv_unit");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
  }

  // A prefilled `tokens`-token prompt's bundle, its full chunks named (seed makes the names).
  StateBundle Bundle(int64_t tokens, uint8_t seed) {
    int32_t first = -1;
    auto gen = Generation::Prefill(
        *backend_, testing::RandomTokens(tokens, model_->config().vocab_size, seed), {}, &first);
    EXPECT_TRUE(gen.ok());
    StateBundle b = gen->ToBundle(model_->fingerprint());
    for (int64_t i = 0; i < tokens / C; ++i) {
      ChunkName name{};
      name[0] = seed;
      name[1] = static_cast<uint8_t>(i);
      b.chunk_names.push_back(name);
    }
    return b;
  }

  absl::StatusOr<StateBundle> Parse(const std::string& bytes) {
    return ParseStateBundle(bytes, model_->config(), model_->fingerprint());
  }

  int64_t ChunkBytes() const { return 2 * C * model_->config().kv_dim() * 4; }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
};

TEST_F(ResidentKvTest, ABundleWithoutHeldChunksRebuildsTheStateSent) {
  const StateBundle whole = Bundle(300, 1);  // two full chunks and 44 rows
  ASSERT_EQ(whole.chunk_names.size(), 2u);
  const std::string whole_bytes = SerializeStateBundle(whole);
  EXPECT_EQ(whole_bytes.size(), StateBundleBytes(model_->config(), 300, 0, 2, 0));
  auto parsed = Parse(whole_bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == whole);

  ResidentKv resident(int64_t{1} << 30);
  resident.Keep(*parsed);
  StateBundle lean = whole;
  lean.resident_chunks = 2;
  const std::string lean_bytes = SerializeStateBundle(lean);
  EXPECT_EQ(static_cast<int64_t>(whole_bytes.size() - lean_bytes.size()), 2 * ChunkBytes());
  auto received = Parse(lean_bytes);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->state.shared_k.rows(), 300 - 2 * C);
  ASSERT_TRUE(resident.Attach(&*received).ok());
  EXPECT_EQ(received->resident_chunks, 0);
  EXPECT_TRUE(received->state == whole.state);
  EXPECT_EQ(received->state.shared_k.chunk_data(0), parsed->state.shared_k.chunk_data(0))
      << "the held chunk is referenced, not copied";
  EXPECT_EQ(resident.stats().attached, 2u);

  // A receiver that does not hold them refuses the bundle, naming the chunk.
  ResidentKv empty(int64_t{1} << 30);
  auto orphan = Parse(lean_bytes);
  ASSERT_TRUE(orphan.ok());
  const absl::Status missing = empty.Attach(&*orphan);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("send the bundle whole"), std::string::npos) << missing;
  EXPECT_EQ(empty.stats().missing, 1u);
}

// Counts the parser must not trust: more names than full chunks, more left out than named.
TEST_F(ResidentKvTest, NameCountsBeyondTheStateAreRefused) {
  StateBundle b = Bundle(300, 2);
  const std::string good = SerializeStateBundle(b);
  const size_t counts =
      good.size() - 4 - 2 * 300 * model_->config().kv_dim() * 4 -
      4 * model_->config().n_self_layers() * model_->config().self_state_floats() - 2 * 16 - 8;
  auto with_counts = [&](uint32_t names, uint32_t resident) {
    std::string bad = good;
    std::memcpy(bad.data() + counts, &names, 4);
    std::memcpy(bad.data() + counts + 4, &resident, 4);
    const uint32_t crc = Crc32c(bad.data(), bad.size() - 4);
    std::memcpy(bad.data() + bad.size() - 4, &crc, 4);
    return Parse(bad).status();
  };
  ASSERT_TRUE(with_counts(2, 0).ok()) << with_counts(2, 0);
  EXPECT_EQ(with_counts(3, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_counts(2, 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_counts(0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_counts(1, 0).code(), absl::StatusCode::kInvalidArgument);  // the size is off
}

TEST_F(ResidentKvTest, IdleChunksGoOldestFirstAndChunksInUseStay) {
  ResidentKv resident(ChunkBytes());  // room for one idle chunk
  StateBundle a = Bundle(2 * C, 3);
  resident.Keep(a);  // a still holds its chunks: in use
  EXPECT_EQ(resident.stats().chunks, 2);
  EXPECT_EQ(resident.stats().idle_bytes, 0);
  a = StateBundle();  // a's sequence ends: both chunks idle, one over the budget
  StateBundle b = Bundle(C, 4);
  resident.Keep(b);
  ResidentKvStats s = resident.stats();
  EXPECT_EQ(s.chunks, 2);  // b's, and a's most recent
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.idle_bytes, ChunkBytes());

  // a's second chunk is still held, its first is not.
  StateBundle again = Bundle(2 * C, 3);
  again.resident_chunks = 2;
  auto parsed = Parse(SerializeStateBundle(again));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(resident.Attach(&*parsed).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace yoco
