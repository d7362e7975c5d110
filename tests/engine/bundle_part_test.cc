// Bundle parts: rows come back exact in either K/V dtype, a flipped byte is corruption,
// and parts of another model, shape or alignment are refused with the bundle's codes.
#include "lib/engine/bundle_part.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "lib/checksum/crc32c.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/state_bundle.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

class BundlePartTest : public ::testing::TestWithParam<KvDtype> {
 protected:
  void SetUp() override {
    config_ = testing::SmallConfig();
    config_.kv_dtype = GetParam();
    model_ = testing::MakeModel(config_, 31, std::string("part_") + KvDtypeName(config_.kv_dtype));
    ASSERT_NE(model_, nullptr);
    CpuBackend backend(model_);
    int32_t first = -1;
    auto gen = Generation::Prefill(backend, testing::RandomTokens(1500, config_.vocab_size, 5), {},
                                   &first);
    ASSERT_TRUE(gen.ok());
    state_ = gen->state();
  }

  std::string Part(int64_t row0, int64_t rows, int32_t index = 1) const {
    std::string bytes(BundlePartBytes(config_, rows), '\0');
    SerializeBundlePartTo(config_, model_->fingerprint(), 77, index, state_, row0, rows,
                          reinterpret_cast<uint8_t*>(bytes.data()));
    return bytes;
  }

  std::string RowBytes(const KvRows& rows, int64_t row0, int64_t n) const {
    std::string out(n * rows.width() * KvDtypeBytes(rows.dtype()), '\0');
    rows.CopyRowBytes(row0, n, reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }

  ModelConfig config_;
  std::shared_ptr<const Model> model_;
  SequenceState state_;
};

TEST_P(BundlePartTest, RowsComeBackExact) {
  const int64_t C = KvRows::kChunkRows;
  const std::string bytes = Part(2 * C, 7 * C);
  EXPECT_TRUE(IsBundlePart(bytes));
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  EXPECT_EQ(stored, Crc32c(bytes.data(), bytes.size() - 4));
  absl::StatusOr<BundlePart> part = ParseBundlePart(bytes, config_, model_->fingerprint());
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->parts_id, 77u);
  EXPECT_EQ(part->index, 1);
  EXPECT_EQ(part->row0, 2 * C);
  ASSERT_EQ(part->k.rows(), 7 * C);
  EXPECT_EQ(part->k.layout(), state_.shared_k.layout());
  EXPECT_EQ(part->v.layout(), state_.shared_v.layout());
  EXPECT_EQ(RowBytes(part->k, 0, 7 * C), RowBytes(state_.shared_k, 2 * C, 7 * C));
  EXPECT_EQ(RowBytes(part->v, 0, 7 * C), RowBytes(state_.shared_v, 2 * C, 7 * C));
}

TEST_P(BundlePartTest, AFlippedByteAfterTheVersionIsCorruption) {
  const std::string good = Part(0, 3 * KvRows::kChunkRows);
  for (size_t i = 12; i < good.size(); i += 997) {  // after the magic and version
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_EQ(ParseBundlePart(bad, config_, model_->fingerprint()).status().code(),
              absl::StatusCode::kDataLoss)
        << "byte " << i;
  }
  EXPECT_EQ(ParseBundlePart(good.substr(0, good.size() - 1), config_, model_->fingerprint())
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseBundlePart(good.substr(0, 40), config_, model_->fingerprint()).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_P(BundlePartTest, ForeignAndMisshapenPartsAreRefused) {
  const int64_t C = KvRows::kChunkRows;
  const std::string good = Part(C, 2 * C);
  EXPECT_EQ(ParseBundlePart(good, config_, model_->fingerprint() + 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ModelConfig wider = config_;
  wider.n_attn_kv_heads = 4;
  EXPECT_EQ(ParseBundlePart(good, wider, model_->fingerprint()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Fields rewritten with a matching checksum (a forged part): not whole chunks, another version.
  auto with_field = [&](size_t offset, uint64_t value, size_t width) {
    std::string bad = good;
    std::memcpy(bad.data() + offset, &value, width);
    const uint32_t crc = Crc32c(bad.data(), bad.size() - 4);
    std::memcpy(bad.data() + bad.size() - 4, &crc, 4);
    return ParseBundlePart(bad, config_, model_->fingerprint()).status().code();
  };
  EXPECT_EQ(with_field(48, C + 1, 8), absl::StatusCode::kInvalidArgument);  // row0
  EXPECT_EQ(with_field(56, C, 8), absl::StatusCode::kInvalidArgument);      // rows vs size
  EXPECT_EQ(with_field(12, 1, 4), absl::StatusCode::kInvalidArgument);      // flags
  EXPECT_EQ(with_field(8, 3, 4), absl::StatusCode::kFailedPrecondition);    // version
  // Chunks stored in other layouts (a build with other lane or strip shapes) cannot be taken as
  // they are: refused as another version's, so that the sender falls back to whole bundles.
  uint32_t storage;
  std::memcpy(&storage, good.data() + 44, 4);
  EXPECT_EQ(with_field(44, storage ^ (1u << 8), 4), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(with_field(44, 0, 4), absl::StatusCode::kFailedPrecondition);
  // A state bundle is not a part, and a part is not a state bundle.
  EXPECT_FALSE(IsBundlePart(SerializeStateBundle(StateBundle{})));
  EXPECT_EQ(ParseStateBundle(good, config_, model_->fingerprint()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Version 1 carried rows, not chunks; prefill workers of that version still send it.
TEST_P(BundlePartTest, PartsOfRowsFromTheVersionBeforeAreRead) {
  const int64_t C = KvRows::kChunkRows;
  const std::string chunks = Part(C, 3 * C, 4);
  std::string rows = chunks.substr(0, 64) + RowBytes(state_.shared_k, C, 3 * C) +
                     RowBytes(state_.shared_v, C, 3 * C);
  const uint32_t version = 1, storage = 0;
  std::memcpy(rows.data() + 8, &version, 4);
  std::memcpy(rows.data() + 44, &storage, 4);
  const uint32_t crc = Crc32c(rows.data(), rows.size());
  rows.append(reinterpret_cast<const char*>(&crc), 4);
  ASSERT_EQ(rows.size(), chunks.size());
  ASSERT_NE(rows, chunks);  // the layouts differ from rows
  absl::StatusOr<BundlePart> part = ParseBundlePart(rows, config_, model_->fingerprint());
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->index, 4);
  EXPECT_EQ(part->row0, C);
  EXPECT_EQ(part->k.layout(), state_.shared_k.layout());
  EXPECT_EQ(part->v.layout(), state_.shared_v.layout());
  EXPECT_EQ(RowBytes(part->k, 0, 3 * C), RowBytes(state_.shared_k, C, 3 * C));
  EXPECT_EQ(RowBytes(part->v, 0, 3 * C), RowBytes(state_.shared_v, C, 3 * C));
  // Version 1 has no storage field: anything there is refused.
  const uint32_t some_storage = 1;
  std::memcpy(rows.data() + 44, &some_storage, 4);
  const uint32_t recrc = Crc32c(rows.data(), rows.size() - 4);
  std::memcpy(rows.data() + rows.size() - 4, &recrc, 4);
  EXPECT_EQ(ParseBundlePart(rows, config_, model_->fingerprint()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Copies `bytes` into the landing's segments in order, as the transport does.
void Land(const std::string& bytes, BundlePartLanding& landing) {
  size_t at = 0;
  for (absl::Span<uint8_t> s : landing.segments()) {
    ASSERT_LE(at + s.size(), bytes.size());
    std::memcpy(s.data(), bytes.data() + at, s.size());
    at += s.size();
  }
  ASSERT_EQ(at, bytes.size());
}

// A part received into its chunks: the rows of the part, in chunks the part now shares (no
// copy), with the same checks as a part received whole.
TEST_P(BundlePartTest, APartLandsInTheChunksItBecomes) {
  const int64_t C = KvRows::kChunkRows;
  const std::string bytes = Part(3 * C, 5 * C, 2);
  std::unique_ptr<BundlePartLanding> landing = BundlePartLanding::ForSize(config_, bytes.size());
  ASSERT_NE(landing, nullptr);
  EXPECT_EQ(landing->bytes(), bytes.size());
  const std::vector<absl::Span<uint8_t>> segments = landing->segments();
  ASSERT_EQ(segments.size(), 1 + 2 * 5 + 1u);  // header, 5 K and 5 V chunks, checksum
  Land(bytes, *landing);
  ASSERT_TRUE(landing->HoldsChunkPart());
  absl::StatusOr<BundlePart> part = landing->Take(config_, model_->fingerprint());
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->parts_id, 77u);
  EXPECT_EQ(part->index, 2);
  EXPECT_EQ(part->row0, 3 * C);
  EXPECT_EQ(part->k.layout(), state_.shared_k.layout());
  EXPECT_EQ(part->v.layout(), state_.shared_v.layout());
  EXPECT_EQ(RowBytes(part->k, 0, 5 * C), RowBytes(state_.shared_k, 3 * C, 5 * C));
  EXPECT_EQ(RowBytes(part->v, 0, 5 * C), RowBytes(state_.shared_v, 3 * C, 5 * C));
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(part->k.chunk_data(i), segments[1 + i].data()) << "K chunk " << i;
    EXPECT_EQ(part->v.chunk_data(i), segments[6 + i].data()) << "V chunk " << i;
  }
  EXPECT_EQ(landing->Gather(), bytes);
}

TEST_P(BundlePartTest, OnlyAPartsSizeLands) {
  const int64_t C = KvRows::kChunkRows;
  const size_t part = BundlePartBytes(config_, 2 * C);
  EXPECT_NE(BundlePartLanding::ForSize(config_, part), nullptr);
  for (size_t size : {size_t{0}, size_t{68}, part - 1, part + 1, BundlePartBytes(config_, C + 1),
                      BundlePartBytes(config_, 0)}) {
    EXPECT_EQ(BundlePartLanding::ForSize(config_, size), nullptr) << size << " bytes";
  }
}

TEST_P(BundlePartTest, ALandedPartIsCheckedAsAWholeOne) {
  const int64_t C = KvRows::kChunkRows;
  const std::string good = Part(C, 2 * C);
  auto take = [&](const std::string& bytes) {
    std::unique_ptr<BundlePartLanding> landing = BundlePartLanding::ForSize(config_, bytes.size());
    EXPECT_NE(landing, nullptr);
    Land(bytes, *landing);
    EXPECT_TRUE(landing->HoldsChunkPart());
    return landing->Take(config_, model_->fingerprint()).status().code();
  };
  for (size_t i = 64; i < good.size(); i += 4999) {  // in the chunks and the checksum
    std::string bad = good;
    bad[i] ^= 0x04;
    EXPECT_EQ(take(bad), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  auto with_field = [&](size_t offset, uint64_t value, size_t width) {
    std::string bad = good;
    std::memcpy(bad.data() + offset, &value, width);
    const uint32_t crc = Crc32c(bad.data(), bad.size() - 4);
    std::memcpy(bad.data() + bad.size() - 4, &crc, 4);
    return bad;
  };
  EXPECT_EQ(take(with_field(16, model_->fingerprint() + 1, 8)),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(take(with_field(48, C + 1, 8)), absl::StatusCode::kInvalidArgument);  // row0
  EXPECT_EQ(take(with_field(12, 1, 4)), absl::StatusCode::kInvalidArgument);      // flags
}

// What lands but is not a part this build takes as it is goes whole to ParseBundlePart.
TEST_P(BundlePartTest, WhatIsNotAChunkPartIsGatheredWhole) {
  const int64_t C = KvRows::kChunkRows;
  const std::string good = Part(0, 2 * C);
  std::string other_version = good, other_rows = good, not_a_part(good.size(), 'x');
  const uint32_t v1 = 1;
  const uint64_t rows = C;
  std::memcpy(other_version.data() + 8, &v1, 4);
  std::memcpy(other_rows.data() + 56, &rows, 8);
  for (const std::string* bytes : {&other_version, &other_rows, &not_a_part}) {
    std::unique_ptr<BundlePartLanding> landing = BundlePartLanding::ForSize(config_, good.size());
    ASSERT_NE(landing, nullptr);
    Land(*bytes, *landing);
    EXPECT_FALSE(landing->HoldsChunkPart());
    EXPECT_EQ(landing->Gather(), *bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, BundlePartTest, ::testing::Values(KvDtype::kF32, KvDtype::kBF16),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

}  // namespace
}  // namespace yoco
