// The forward pass agrees with itself across its forms, for each way of holding the weights
// (fp32, bf16, q8) and the shared K/V (fp32, bf16): prefill then decode gives the logits of the
// full forward pass at every position; resumed prefill, batched decode and mixed batches give what
// separate calls give; bad input changes nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

#include "kernels/cpu/linear.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

using testing::MakeModel;
using testing::RandomTokens;
using testing::SmallConfig;

double MaxAbsDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// (sliding window, weight format, K/V dtype).
class ForwardConsistencyTest
    : public ::testing::TestWithParam<std::tuple<bool, WeightFormat, KvDtype>> {
 protected:
  void SetUp() override {
    const bool swa = std::get<0>(GetParam());
    const WeightFormat format = std::get<1>(GetParam());
    ModelConfig config = SmallConfig(swa ? std::optional<int>(16) : std::nullopt);
    config.kv_dtype = std::get<2>(GetParam());
    model_ = MakeModel(config, swa ? 7 : 8,
                       std::string(swa ? "consistency_swa_" : "consistency_gret_") +
                           WeightFormatName(format) + "_kv_" + KvDtypeName(config.kv_dtype),
                       DType::kF32, format);
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
    V_ = model_->config().vocab_size;
  }

  std::vector<float> FullLogits(const std::vector<int32_t>& tokens) {
    SequenceState state = SequenceState::Create(model_->config());
    ForwardSegment seg{&state, tokens, LogitsMode::kAll};
    std::vector<float> logits;
    EXPECT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
    return logits;
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
  int64_t V_ = 0;
};

TEST_P(ForwardConsistencyTest, PrefillThenDecodeEqualsFullForwardAtEveryPosition) {
  const auto tokens = RandomTokens(300, static_cast<int>(V_), 1);  // longer than one 256 chunk
  const std::vector<float> full = FullLogits(tokens);
  const double tol = 1e-4 * MaxAbs(full);
  for (int64_t split : {0, 1, 150, 257, 299}) {
    SequenceState state = SequenceState::Create(model_->config());
    std::vector<float> logits;
    if (split > 0) {
      ForwardSegment seg{&state, absl::MakeConstSpan(tokens).subspan(0, split), LogitsMode::kLast};
      ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
      EXPECT_LE(MaxAbsDiff(logits.data(), full.data() + (split - 1) * V_, V_), tol)
          << "prefill to " << split;
    }
    for (int64_t t = split; t < static_cast<int64_t>(tokens.size()); ++t) {
      ForwardSegment seg{&state, {&tokens[t], 1}, LogitsMode::kLast};
      ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
      ASSERT_LE(MaxAbsDiff(logits.data(), full.data() + t * V_, V_), tol)
          << "split " << split << " position " << t;
    }
    EXPECT_EQ(state.position, 300);
  }
}

TEST_P(ForwardConsistencyTest, ResumedPrefillEqualsOnePass) {
  const auto tokens = RandomTokens(280, static_cast<int>(V_), 2);
  const std::vector<float> full = FullLogits(tokens);
  SequenceState state = SequenceState::Create(model_->config());
  std::vector<float> pieces, logits;
  for (auto [begin, n] : {std::pair<int, int>{0, 100}, {100, 3}, {103, 177}}) {
    ForwardSegment seg{&state, absl::MakeConstSpan(tokens).subspan(begin, n), LogitsMode::kAll};
    ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
    pieces.insert(pieces.end(), logits.begin(), logits.end());
  }
  ASSERT_EQ(pieces.size(), full.size());
  EXPECT_LE(MaxAbsDiff(pieces.data(), full.data(), full.size()), 1e-4 * MaxAbs(full));
}

TEST_P(ForwardConsistencyTest, BatchedDecodeEqualsSeparateDecode) {
  // Three sequences at different positions, decoded together and one by one.
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 20;
  std::vector<Generation> batch, alone;
  for (int i = 0; i < 3; ++i) {
    const auto prompt = RandomTokens(20 + 70 * i, static_cast<int>(V_), 10 + i);
    sampling.seed = 100 + i;
    auto a = Generation::Start(*backend_, prompt, sampling);
    auto b = Generation::Start(*backend_, prompt, sampling);
    ASSERT_TRUE(a.ok() && b.ok());
    batch.push_back(std::move(*a));
    alone.push_back(std::move(*b));
  }
  std::vector<Generation*> ptrs = {&batch[0], &batch[1], &batch[2]};
  for (int step = 0; step < 12; ++step) {
    std::vector<int32_t> batched;
    ASSERT_TRUE(Generation::NextBatch(*backend_, ptrs, &batched).ok());
    for (int i = 0; i < 3; ++i) {
      auto tok = alone[i].Next(*backend_);
      ASSERT_TRUE(tok.ok());
      EXPECT_EQ(batched[i], *tok) << "sequence " << i << " step " << step;
    }
  }
}

// A sequence's decode logits are the same bits in a batch as alone, at every batch size, so its
// tokens cannot depend on which sequences it was batched with (CpuBackendOptions::
// batch_invariant): 40 rows are past what any matrix streams in one pass on an AVX2 build, and
// fp32 rows stream 8 at a time anywhere. The first sequence is longer than one decode-attention
// key range (512), which the kernel must cut the same way in a batch as alone.
TEST_P(ForwardConsistencyTest, BatchedDecodeGivesTheBitsOfSeparateDecode) {
  for (int64_t batch : {int64_t{3}, int64_t{12}, int64_t{40}}) {
    std::vector<SequenceState> together, alone;
    for (int64_t i = 0; i < batch; ++i) {
      const auto prompt = RandomTokens(i == 0 ? 700 : 10 + 13 * i, static_cast<int>(V_), 40 + i);
      std::vector<float> logits;
      SequenceState state = SequenceState::Create(model_->config());
      ForwardSegment seg{&state, prompt, LogitsMode::kLast};
      ASSERT_TRUE(backend_->Forward({&seg, 1}, &logits).ok());
      together.push_back(state);
      alone.push_back(std::move(state));
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<int32_t> tokens(batch);
      std::vector<ForwardSegment> segments;
      for (int64_t i = 0; i < batch; ++i) {
        tokens[i] = static_cast<int32_t>((7 * i + step) % V_);
        segments.push_back({&together[i], {&tokens[i], 1}, LogitsMode::kLast});
      }
      std::vector<float> batched, single;
      ASSERT_TRUE(backend_->Forward(segments, &batched).ok());
      for (int64_t i = 0; i < batch; ++i) {
        ForwardSegment seg{&alone[i], {&tokens[i], 1}, LogitsMode::kLast};
        ASSERT_TRUE(backend_->Forward({&seg, 1}, &single).ok());
        ASSERT_EQ(0, std::memcmp(single.data(), batched.data() + i * V_, V_ * sizeof(float)))
            << "batch " << batch << " sequence " << i << " step " << step;
      }
    }
  }
}

TEST_P(ForwardConsistencyTest, MixedPrefillAndDecodeBatchEqualsSeparateCalls) {
  const auto a_tokens = RandomTokens(40, static_cast<int>(V_), 3);
  const auto b_tokens = RandomTokens(90, static_cast<int>(V_), 4);
  SequenceState a1 = SequenceState::Create(model_->config()), a2 = a1, b1 = a1, b2 = a1;
  std::vector<float> logits;
  ForwardSegment a_pre{&a1, absl::MakeConstSpan(a_tokens).subspan(0, 39), LogitsMode::kNone};
  ASSERT_TRUE(backend_->Forward({&a_pre, 1}, &logits).ok());
  a2 = a1;
  // One call: a's decode step and b's whole prefill with all its logits.
  ForwardSegment mixed[] = {{&a1, absl::MakeConstSpan(a_tokens).subspan(39, 1), LogitsMode::kLast},
                            {&b1, b_tokens, LogitsMode::kAll}};
  std::vector<float> together;
  ASSERT_TRUE(backend_->Forward(mixed, &together).ok());
  ASSERT_EQ(together.size(), static_cast<size_t>((1 + 90) * V_));
  ForwardSegment a_step{&a2, absl::MakeConstSpan(a_tokens).subspan(39, 1), LogitsMode::kLast};
  ASSERT_TRUE(backend_->Forward({&a_step, 1}, &logits).ok());
  EXPECT_LE(MaxAbsDiff(together.data(), logits.data(), V_), 1e-5);
  ForwardSegment b_all{&b2, b_tokens, LogitsMode::kAll};
  ASSERT_TRUE(backend_->Forward({&b_all, 1}, &logits).ok());
  EXPECT_LE(MaxAbsDiff(together.data() + V_, logits.data(), 90 * V_), 1e-5);
  EXPECT_EQ(a1.position, a2.position);
  EXPECT_EQ(b1.position, b2.position);
}

TEST_P(ForwardConsistencyTest, EarlyExitPrefillGivesTheReferenceLoopsTokens) {
  const auto prompt = RandomTokens(270, static_cast<int>(V_), 5);
  for (float temperature : {0.0f, 1.0f}) {
    SamplingParams sampling;
    sampling.temperature = temperature;
    sampling.top_p = 0.9f;
    sampling.seed = 42;
    GenerateOptions options{10, sampling, false};
    auto reference = Generate(*backend_, prompt, options);
    ASSERT_TRUE(reference.ok());
    int32_t first = -1;
    auto gen = Generation::Prefill(*backend_, prompt, sampling, &first);
    ASSERT_TRUE(gen.ok());
    std::vector<int32_t> tokens = {first};
    while (tokens.size() < 10) tokens.push_back(*gen->Next(*backend_));
    EXPECT_EQ(tokens, *reference) << "temperature " << temperature;
  }
}

TEST_P(ForwardConsistencyTest, BadInputIsRefusedAndChangesNothing) {
  SequenceState state = SequenceState::Create(model_->config());
  const auto tokens = RandomTokens(10, static_cast<int>(V_), 6);
  std::vector<float> logits;
  ForwardSegment ok{&state, tokens, LogitsMode::kNone};
  ASSERT_TRUE(backend_->Forward({&ok, 1}, &logits).ok());
  const SequenceState before = state;

  const int32_t bad_ids[] = {5, static_cast<int32_t>(V_)};
  ForwardSegment bad{&state, bad_ids, LogitsMode::kLast};
  EXPECT_EQ(backend_->Forward({&bad, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);
  const int32_t negative[] = {-1};
  ForwardSegment neg{&state, negative, LogitsMode::kLast};
  EXPECT_EQ(backend_->Forward({&neg, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);
  ForwardSegment empty{&state, {}, LogitsMode::kLast};
  EXPECT_EQ(backend_->Forward({&empty, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);
  ForwardSegment twice[] = {{&state, tokens, LogitsMode::kNone},
                            {&state, tokens, LogitsMode::kNone}};
  EXPECT_EQ(backend_->Forward(twice, &logits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(state == before);

  SequenceState wrong = state;
  wrong.shared_k.Resize(wrong.shared_k.rows() - 1);
  ForwardSegment mis{&wrong, tokens, LogitsMode::kNone};
  EXPECT_EQ(backend_->Forward({&mis, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);

  // K/V rows of the right shape in the other dtype (a forged or mismatched bundle's state).
  SequenceState other = state;
  const KvDtype other_dtype =
      state.shared_k.dtype() == KvDtype::kF32 ? KvDtype::kBF16 : KvDtype::kF32;
  for (KvRows* rows : {&other.shared_k, &other.shared_v}) {
    *rows = KvRows(other_dtype, rows->width());
    rows->Resize(state.position);
  }
  ForwardSegment other_dtype_segment{&other, tokens, LogitsMode::kNone};
  EXPECT_EQ(backend_->Forward({&other_dtype_segment, 1}, &logits).code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(Generation::Start(*backend_, {}, SamplingParams{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ForwardConsistencyTest, ProfilingChangesNoBitAndAccountsForEveryCall) {
  CpuBackend profiled(model_, {.profile = true});
  const auto prompt = RandomTokens(40, static_cast<int>(V_), 21);
  SequenceState plain_state = SequenceState::Create(model_->config());
  SequenceState profiled_state = plain_state;
  std::vector<float> plain, timed;
  for (int call = 0; call < 3; ++call) {
    const int32_t next = static_cast<int32_t>(call + 5);
    absl::Span<const int32_t> tokens =
        call == 0 ? absl::MakeConstSpan(prompt) : absl::Span<const int32_t>(&next, 1);
    ForwardSegment a{&plain_state, tokens, LogitsMode::kLast};
    ForwardSegment b{&profiled_state, tokens, LogitsMode::kLast};
    ASSERT_TRUE(backend_->Forward({&a, 1}, &plain).ok());
    ASSERT_TRUE(profiled.Forward({&b, 1}, &timed).ok());
    ASSERT_EQ(plain.size(), timed.size());
    EXPECT_EQ(std::memcmp(plain.data(), timed.data(), plain.size() * sizeof(float)), 0)
        << "call " << call;
  }
  const CpuProfile& p = profiled.profile();
  EXPECT_EQ(p.calls, 3);
  EXPECT_GT(p.projection_ms, 0);
  EXPECT_GT(p.ffn_ms, 0);
  EXPECT_GT(p.retention_ms, 0);
  EXPECT_GT(p.attention_ms, 0);
  EXPECT_LE(p.projection_ms + p.ffn_ms + p.retention_ms + p.attention_ms, p.total_ms);
  EXPECT_EQ(backend_->profile().calls, 0);  // off unless asked for
  profiled.ResetProfile();
  EXPECT_EQ(profiled.profile().calls, 0);
  EXPECT_EQ(profiled.profile().total_ms, 0);
}

INSTANTIATE_TEST_SUITE_P(SelfAttention, ForwardConsistencyTest,
                         ::testing::Combine(::testing::Values(false, true),
                                            ::testing::Values(WeightFormat::kAsStored,
                                                              WeightFormat::kBF16,
                                                              WeightFormat::kQ8),
                                            ::testing::Values(KvDtype::kF32, KvDtype::kBF16)),
                         [](const auto& info) {
                           const WeightFormat format = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param) ? "SlidingWindow"
                                                                      : "GatedRetention") +
                                  (format == WeightFormat::kBF16 ? "Bf16"
                                   : format == WeightFormat::kQ8 ? "Q8"
                                                                 : "") +
                                  (std::get<2>(info.param) == KvDtype::kBF16 ? "KvBf16" : "");
                         });

TEST(ForwardLimitsTest, MaxSeqLenIsEnforced) {
  ModelConfig config = SmallConfig();
  config.max_seq_len = 32;
  auto model = MakeModel(config, 9, "max_seq_len");
  ASSERT_NE(model, nullptr);
  CpuBackend backend(model);
  SequenceState state = SequenceState::Create(config);
  const auto tokens = RandomTokens(33, config.vocab_size, 7);
  std::vector<float> logits;
  ForwardSegment too_long{&state, tokens, LogitsMode::kLast};
  EXPECT_EQ(backend.Forward({&too_long, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);
  ForwardSegment fits{&state, absl::MakeConstSpan(tokens).subspan(0, 32), LogitsMode::kLast};
  EXPECT_TRUE(backend.Forward({&fits, 1}, &logits).ok());
}

}  // namespace
}  // namespace yoco
