// BundlePartStore: parts joined in front of their bundle's rows give the whole state back, bit
// for bit; a missing, misplaced or duplicated part is refused, one sender's parts are never
// another's, and parts left behind expire.
#include "lib/workers/bundle_part_store.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

constexpr int64_t C = KvRows::kChunkRows;

class BundlePartStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeModel(testing::SmallConfig(), 61, "part_store");
    ASSERT_NE(model_, nullptr);
    CpuBackend backend(model_);
    int32_t first = -1;
    auto gen = Generation::Prefill(
        backend, testing::RandomTokens(1000, model_->config().vocab_size, 8), {}, &first);
    ASSERT_TRUE(gen.ok());
    whole_ = gen->ToBundle(model_->fingerprint());
  }

  // Part `index` of parts id 5: rows [row0, row0 + rows) of the document.
  BundlePart Part(int32_t index, int64_t row0, int64_t rows) const {
    std::string bytes(BundlePartBytes(model_->config(), rows), '\0');
    SerializeBundlePartTo(model_->config(), model_->fingerprint(), 5, index, whole_.state, row0,
                          rows, reinterpret_cast<uint8_t*>(bytes.data()));
    return *ParseBundlePart(bytes, model_->config(), model_->fingerprint());
  }

  // The bundle as received: rows from `part_rows` on, naming `parts` parts.
  StateBundle Received(int32_t parts, int64_t part_rows) const {
    StateBundle b = whole_;
    b.parts_id = 5;
    b.parts = parts;
    b.part_rows = part_rows;
    return *ParseStateBundle(SerializeStateBundle(b), model_->config(), model_->fingerprint());
  }

  static std::string Bytes(const KvRows& rows) {
    std::string out(rows.bytes(), '\0');
    rows.CopyRowBytes(0, rows.rows(), reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }

  std::shared_ptr<const Model> model_;
  StateBundle whole_;
  const absl::Time now_ = absl::Now();
};

TEST_F(BundlePartStoreTest, JoinedPartsGiveTheWholeStateBack) {
  BundlePartStore store;
  // Out of order, as concurrent transfers may complete.
  ASSERT_TRUE(store.Put(9, Part(2, 4 * C, 3 * C), 300, now_).ok());
  ASSERT_TRUE(store.Put(9, Part(0, 0, 2 * C), 100, now_).ok());
  ASSERT_TRUE(store.Put(9, Part(1, 2 * C, 2 * C), 200, now_).ok());
  EXPECT_EQ(store.bytes(), 600);
  StateBundle b = Received(3, 7 * C);
  EXPECT_EQ(b.state.shared_k.rows(), 1000 - 7 * C);
  absl::StatusOr<int64_t> joined = store.Join(9, &b);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(*joined, 600);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(b.parts, 0);
  EXPECT_EQ(b.state.shared_k.layout(), whole_.state.shared_k.layout());
  EXPECT_EQ(Bytes(b.state.shared_k), Bytes(whole_.state.shared_k));
  EXPECT_EQ(Bytes(b.state.shared_v), Bytes(whole_.state.shared_v));
  EXPECT_TRUE(b == whole_);
}

TEST_F(BundlePartStoreTest, MissingMisplacedAndDuplicatedPartsAreRefused) {
  BundlePartStore store;
  ASSERT_TRUE(store.Put(9, Part(0, 0, 2 * C), 100, now_).ok());
  EXPECT_EQ(store.Put(9, Part(0, 0, 2 * C), 100, now_).code(), absl::StatusCode::kInvalidArgument);
  StateBundle b = Received(2, 4 * C);
  EXPECT_EQ(store.Join(9, &b).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.bytes(), 0);  // dropped: the sender sends the bundle whole

  ASSERT_TRUE(store.Put(9, Part(0, 0, 2 * C), 100, now_).ok());
  ASSERT_TRUE(store.Put(9, Part(1, 3 * C, 2 * C), 100, now_).ok());  // a chunk skipped
  StateBundle gap = Received(2, 4 * C);
  EXPECT_EQ(store.Join(9, &gap).status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(store.Put(9, Part(0, 0, 2 * C), 100, now_).ok());
  ASSERT_TRUE(store.Put(9, Part(1, 2 * C, 2 * C), 100, now_).ok());
  StateBundle more = Received(2, 5 * C);  // names more rows than the parts hold
  EXPECT_EQ(store.Join(9, &more).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.bytes(), 0);
}

TEST_F(BundlePartStoreTest, OneSendersPartsAreNotAnothersAndLeftoversExpire) {
  BundlePartStore store;
  ASSERT_TRUE(store.Put(9, Part(0, 0, 7 * C), 100, now_).ok());
  StateBundle b = Received(1, 7 * C);
  EXPECT_EQ(store.Join(10, &b).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.bytes(), 100);  // sender 9's part stays
  store.DropArrivedBefore(now_);
  EXPECT_EQ(store.bytes(), 100);
  store.DropArrivedBefore(now_ + absl::Seconds(1));
  EXPECT_EQ(store.bytes(), 0);
  StateBundle late = Received(1, 7 * C);
  EXPECT_EQ(store.Join(9, &late).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace yoco
