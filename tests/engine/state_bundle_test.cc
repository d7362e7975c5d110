// State bundles: exact round trip, identical continuation after save/restore mid-generation,
// and refusal of corrupt, truncated, foreign and mismatched bundles.
#include "lib/engine/state_bundle.h"

#include <gtest/gtest.h>

#include <cstring>

#include "lib/checksum/crc32c.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using testing::MakeModel;
using testing::RandomTokens;
using testing::SmallConfig;

// (sliding window, K/V dtype).
class StateBundleTest : public ::testing::TestWithParam<std::tuple<bool, KvDtype>> {
 protected:
  void SetUp() override {
    const bool swa = std::get<0>(GetParam());
    ModelConfig config = SmallConfig(swa ? std::optional<int>(16) : std::nullopt);
    config.kv_dtype = std::get<1>(GetParam());
    model_ =
        MakeModel(config, 21,
                  std::string(swa ? "bundle_swa_" : "bundle_gret_") + KvDtypeName(config.kv_dtype));
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
};

TEST_P(StateBundleTest, SaveMidGenerationRestoreContinueGivesIdenticalTokens) {
  const auto prompt = RandomTokens(60, model_->config().vocab_size, 1);
  for (float temperature : {0.0f, 0.9f}) {
    SamplingParams sampling;
    sampling.temperature = temperature;
    sampling.top_k = 30;
    sampling.seed = 7;
    sampling.stop_token_ids = {3};
    auto uninterrupted = Generation::Start(*backend_, prompt, sampling);
    ASSERT_TRUE(uninterrupted.ok());
    std::vector<int32_t> want;
    for (int i = 0; i < 30; ++i) want.push_back(*uninterrupted->Next(*backend_));

    auto first = Generation::Start(*backend_, prompt, sampling);
    ASSERT_TRUE(first.ok());
    std::vector<int32_t> got;
    for (int i = 0; i < 11; ++i) got.push_back(*first->Next(*backend_));
    const std::string bytes = SerializeStateBundle(first->ToBundle(model_->fingerprint()));
    first = absl::UnknownError("discarded");  // nothing of the first run survives but the bytes

    // A fresh backend, as on another worker.
    CpuBackend other(model_);
    auto bundle = ParseStateBundle(bytes, model_->config(), model_->fingerprint());
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    auto resumed = Generation::FromBundle(std::move(*bundle));
    ASSERT_TRUE(resumed.ok());
    while (got.size() < want.size()) got.push_back(*resumed->Next(other));
    EXPECT_EQ(got, want) << "temperature " << temperature;
  }
}

TEST_P(StateBundleTest, RoundTripIsExact) {
  int32_t first = -1;
  SamplingParams sampling;
  sampling.temperature = 0.5f;
  sampling.top_p = 0.8f;
  sampling.seed = 99;
  sampling.stop_token_ids = {2, 5};
  auto gen = Generation::Prefill(*backend_, RandomTokens(40, model_->config().vocab_size, 2),
                                 sampling, &first);
  ASSERT_TRUE(gen.ok());
  const StateBundle original = gen->ToBundle(model_->fingerprint());
  auto parsed =
      ParseStateBundle(SerializeStateBundle(original), model_->config(), model_->fingerprint());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == original);
  EXPECT_EQ(parsed->pending_token, first);
  EXPECT_EQ(parsed->state.position, 40);
}

// Workers serialise into buffers reused from earlier bundles: every byte is written, so nothing
// of a buffer's last bundle (another tenant's document) travels with the next.
TEST_P(StateBundleTest, SerialisingWritesEveryByteOfTheBuffer) {
  int32_t first = -1;
  auto gen =
      Generation::Prefill(*backend_, RandomTokens(300, model_->config().vocab_size, 3), {}, &first);
  ASSERT_TRUE(gen.ok());
  StateBundle bundle = gen->ToBundle(model_->fingerprint());
  for (int i = 0; i < 2; ++i) bundle.chunk_names.push_back({});  // version 2, with names
  bundle.chunk_names[1][0] = 7;
  for (const int resident : {0, 1}) {
    bundle.resident_chunks = resident;
    const size_t n = SerializedStateBundleBytes(bundle);
    std::string zeros(n, '\0'), ones(n, '\xff');
    SerializeStateBundleTo(bundle, reinterpret_cast<uint8_t*>(zeros.data()));
    SerializeStateBundleTo(bundle, reinterpret_cast<uint8_t*>(ones.data()));
    EXPECT_EQ(zeros, ones) << resident << " chunks left out";
    EXPECT_EQ(zeros, SerializeStateBundle(bundle));
  }
}

// Bundles longer than one of the slices the checksum is computed behind (128 KB of rows): the
// stored CRC is that of the whole, the rows come back exact, and a byte flipped anywhere (header,
// either K/V section, a slice boundary, the states) is corruption.
TEST_P(StateBundleTest, LongBundlesAreExactAndAFlipAnywhereIsCaught) {
  constexpr int kTokens = 2600;  // 650-1300 KB of rows: several slices in either dtype
  int32_t first = -1;
  auto gen = Generation::Prefill(*backend_, RandomTokens(kTokens, model_->config().vocab_size, 4),
                                 {}, &first);
  ASSERT_TRUE(gen.ok());
  const ModelConfig& config = model_->config();
  const uint64_t fp = model_->fingerprint();
  StateBundle bundle = gen->ToBundle(fp);
  for (int i = 0; i < 6; ++i) bundle.chunk_names.push_back({static_cast<uint8_t>(i)});
  for (const int resident : {0, 3}) {
    bundle.resident_chunks = resident;
    const std::string bytes = SerializeStateBundle(bundle);
    uint32_t stored;
    std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
    EXPECT_EQ(stored, Crc32c(bytes.data(), bytes.size() - 4));

    absl::StatusOr<StateBundle> parsed = ParseStateBundle(bytes, config, fp);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const int64_t skipped = int64_t{resident} * KvRows::kChunkRows;
    for (const auto& [got, want] : {std::pair(&parsed->state.shared_k, &bundle.state.shared_k),
                                    std::pair(&parsed->state.shared_v, &bundle.state.shared_v)}) {
      ASSERT_EQ(got->rows(), kTokens - skipped);
      std::string a(got->bytes(), '\0'), b(got->bytes(), '\0');
      got->CopyRowBytes(0, got->rows(), reinterpret_cast<uint8_t*>(a.data()));
      want->CopyRowBytes(skipped, got->rows(), reinterpret_cast<uint8_t*>(b.data()));
      EXPECT_EQ(a, b);
    }
    EXPECT_EQ(parsed->state.self_states, bundle.state.self_states);
    EXPECT_EQ(parsed->pending_token, first);

    std::vector<size_t> flips;
    for (size_t i = 16; i < bytes.size(); i += 3001) flips.push_back(i);
    const size_t k_at = bytes.size() - 4 - 2 * static_cast<size_t>(parsed->state.shared_k.bytes()) -
                        4 * config.n_self_layers() * config.self_state_floats();
    for (size_t edge : {k_at, k_at + (128 << 10), k_at + parsed->state.shared_k.bytes()}) {
      flips.push_back(edge - 1);
      flips.push_back(edge);
    }
    flips.push_back(bytes.size() - 5);
    for (size_t i : flips) {
      std::string bad = bytes;
      bad[i] ^= 0x04;
      EXPECT_EQ(ParseStateBundle(bad, config, fp).status().code(), absl::StatusCode::kDataLoss)
          << "byte " << i << " of " << bytes.size();
    }
  }
}

// A bundle whose rows went ahead in parts (version 3) carries only the rows after them (and
// after its resident chunks); forged counts are refused.
TEST_P(StateBundleTest, PartedBundlesCarryOnlyTheRowsAfterTheirParts) {
  const int64_t C = KvRows::kChunkRows;
  int32_t first = -1;
  auto gen =
      Generation::Prefill(*backend_, RandomTokens(700, model_->config().vocab_size, 6), {}, &first);
  ASSERT_TRUE(gen.ok());
  const ModelConfig& config = model_->config();
  const uint64_t fp = model_->fingerprint();
  StateBundle bundle = gen->ToBundle(fp);
  auto rows_of = [](const KvRows& rows, int64_t row0, int64_t n) {
    std::string out(n * rows.width() * KvDtypeBytes(rows.dtype()), '\0');
    rows.CopyRowBytes(row0, n, reinterpret_cast<uint8_t*>(out.data()));
    return out;
  };
  for (const bool named : {false, true}) {
    bundle.chunk_names.clear();
    if (named) bundle.chunk_names = {ChunkName{1}, ChunkName{2}};
    bundle.resident_chunks = named ? 1 : 0;
    bundle.parts_id = 9;
    bundle.parts = 2;
    bundle.part_rows = named ? 4 * C : 5 * C;
    const std::string bytes = SerializeStateBundle(bundle);
    EXPECT_EQ(bytes.size(),
              StateBundleBytes(config, 700, 0, named ? 2 : 0, named ? 1 : 0, bundle.part_rows));
    absl::StatusOr<StateBundle> parsed = ParseStateBundle(bytes, config, fp);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->parts_id, 9u);
    EXPECT_EQ(parsed->parts, 2);
    EXPECT_EQ(parsed->part_rows, bundle.part_rows);
    EXPECT_EQ(parsed->resident_chunks, bundle.resident_chunks);
    EXPECT_EQ(parsed->state.position, 700);
    ASSERT_EQ(parsed->state.shared_k.rows(), 700 - 5 * C);
    EXPECT_EQ(rows_of(parsed->state.shared_k, 0, 60), rows_of(bundle.state.shared_k, 5 * C, 60));
    EXPECT_EQ(rows_of(parsed->state.shared_v, 0, 60), rows_of(bundle.state.shared_v, 5 * C, 60));
  }
  // Without names the parts section starts right after the (empty) names section.
  bundle.chunk_names.clear();
  bundle.resident_chunks = 0;
  bundle.part_rows = 5 * C;
  const std::string good = SerializeStateBundle(bundle);
  auto with_field = [&](size_t offset, uint64_t value, size_t width) {
    std::string bad = good;
    std::memcpy(bad.data() + offset, &value, width);
    const uint32_t crc = Crc32c(bad.data(), bad.size() - 4);
    std::memcpy(bad.data() + bad.size() - 4, &crc, 4);
    return ParseStateBundle(bad, config, fp).status().code();
  };
  constexpr size_t kPartsAt = 80 + 8;  // fixed header, no stop ids, the names' counts
  EXPECT_EQ(with_field(kPartsAt + 8, 0, 4), absl::StatusCode::kInvalidArgument);  // no parts
  EXPECT_EQ(with_field(kPartsAt + 8, 6, 4), absl::StatusCode::kInvalidArgument);  // > chunks
  EXPECT_EQ(with_field(kPartsAt + 16, 5 * C + 1, 8), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_field(kPartsAt + 16, 6 * C, 8), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_field(kPartsAt + 16, 4 * C, 8), absl::StatusCode::kInvalidArgument);  // size
}

// A generation that has prefilled nothing: empty K/V sections (under UBSan this used to hand
// memcpy a null pointer).
TEST_P(StateBundleTest, RoundTripAtPositionZero) {
  auto gen = Generation::Start(*backend_, {0}, {});  // BOS pending, nothing prefilled
  ASSERT_TRUE(gen.ok()) << gen.status();
  const StateBundle original = gen->ToBundle(model_->fingerprint());
  ASSERT_EQ(original.state.position, 0);
  auto parsed =
      ParseStateBundle(SerializeStateBundle(original), model_->config(), model_->fingerprint());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == original);
}

// Found by the state-bundle fuzzer: fields the parser ignored (flags; the K/V width of an empty
// bundle) let two byte strings mean the same bundle. Both are now refused unless canonical.
TEST_P(StateBundleTest, OnlyCanonicalBundlesParse) {
  auto gen = Generation::Start(*backend_, {0}, {});
  ASSERT_TRUE(gen.ok());
  const std::string good = SerializeStateBundle(gen->ToBundle(model_->fingerprint()));
  ASSERT_TRUE(ParseStateBundle(good, model_->config(), model_->fingerprint()).ok());
  auto with_field = [&](size_t offset, uint32_t value) {
    std::string bad = good;
    std::memcpy(bad.data() + offset, &value, 4);
    const uint32_t crc = Crc32c(bad.data(), bad.size() - 4);
    std::memcpy(bad.data() + bad.size() - 4, &crc, 4);
    return ParseStateBundle(bad, model_->config(), model_->fingerprint()).status();
  };
  EXPECT_EQ(with_field(12, 1).code(), absl::StatusCode::kInvalidArgument);  // flags
  EXPECT_EQ(with_field(36, 7).code(), absl::StatusCode::kInvalidArgument);  // K/V width at 0
}

TEST_P(StateBundleTest, CorruptTruncatedAndForeignBundlesAreRefused) {
  auto gen = Generation::Start(*backend_, RandomTokens(30, model_->config().vocab_size, 3),
                               SamplingParams{});
  ASSERT_TRUE(gen.ok());
  const std::string good = SerializeStateBundle(gen->ToBundle(model_->fingerprint()));
  const ModelConfig& config = model_->config();
  const uint64_t fp = model_->fingerprint();
  ASSERT_TRUE(ParseStateBundle(good, config, fp).ok());

  // Any single flipped byte after the magic and version is caught by the checksum.
  for (size_t i : {size_t{20}, size_t{60}, good.size() / 2, good.size() - 10, good.size() - 1}) {
    std::string bad = good;
    bad[i] ^= 0x40;
    EXPECT_EQ(ParseStateBundle(bad, config, fp).status().code(), absl::StatusCode::kDataLoss)
        << "byte " << i;
  }
  EXPECT_EQ(ParseStateBundle(good.substr(0, good.size() - 1), config, fp).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseStateBundle(good.substr(0, 20), config, fp).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseStateBundle("", config, fp).status().code(), absl::StatusCode::kDataLoss);

  std::string not_bundle = good;
  not_bundle[0] = 'X';
  EXPECT_EQ(ParseStateBundle(not_bundle, config, fp).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string future = good;
  future[8] = 9;  // version 9
  EXPECT_EQ(ParseStateBundle(future, config, fp).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Made by another model: refused by fingerprint even though the shapes fit.
  EXPECT_EQ(ParseStateBundle(good, config, fp + 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A model of another shape with the same fingerprint (impossible in practice) is still refused.
  ModelConfig wider = config;
  wider.n_attn_kv_heads = 4;
  EXPECT_EQ(ParseStateBundle(good, wider, fp).status().code(), absl::StatusCode::kInvalidArgument);
}

// A bundle carries its K/V dtype: it is as long as that dtype makes it, and a worker that holds
// the other dtype refuses it by name, whatever fingerprint it is given (a forged header).
TEST_P(StateBundleTest, BundlesOfTheOtherKvDtypeAreRefused) {
  int32_t first = -1;
  auto gen =
      Generation::Prefill(*backend_, RandomTokens(40, model_->config().vocab_size, 3), {}, &first);
  ASSERT_TRUE(gen.ok());
  const std::string bytes = SerializeStateBundle(gen->ToBundle(model_->fingerprint()));
  const ModelConfig& config = model_->config();
  EXPECT_EQ(bytes.size(), StateBundleBytes(config, 40, 0));
  EXPECT_EQ(gen->state().shared_k.bytes(), 40 * config.kv_dim() * KvDtypeBytes(config.kv_dtype));

  ModelConfig other = config;
  other.kv_dtype = config.kv_dtype == KvDtype::kF32 ? KvDtype::kBF16 : KvDtype::kF32;
  const absl::Status refused = ParseStateBundle(bytes, other, model_->fingerprint()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("K/V dtype"), absl::string_view::npos) << refused;
  // The same weights with the other K/V dtype are another model to bundles and snapshots.
  auto other_model = MakeModel(other, 21, "bundle_other_kv");
  ASSERT_NE(other_model, nullptr);
  EXPECT_NE(other_model->fingerprint(), model_->fingerprint());
}

INSTANTIATE_TEST_SUITE_P(SelfAttention, StateBundleTest,
                         ::testing::Combine(::testing::Values(false, true),
                                            ::testing::Values(KvDtype::kF32, KvDtype::kBF16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "SlidingWindow"
                                                                      : "GatedRetention") +
                                  (std::get<1>(info.param) == KvDtype::kBF16 ? "KvBf16" : "");
                         });

}  // namespace
}  // namespace yoco
