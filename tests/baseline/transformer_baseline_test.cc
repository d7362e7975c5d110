// The benchmark's Transformer baseline is a real causal Transformer: decoding token by token
// gives the logits of prefilling the longer prompt, batched decode equals separate decode, and
// its cache grows by one K/V row per layer per token, whichever way it holds its weights.
#include "tools/baseline/transformer_baseline.h"

#include <gtest/gtest.h>

#include "tests/engine/test_models.h"

namespace yoco {
namespace {

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

// For each way the benchmark holds the weights (bf16 ones are packed as YOCO's loader packs them).
class TransformerBaselineTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(TransformerBaselineTest, DecodeEqualsPrefillAndBatchesAgree) {
  const ModelConfig config = testing::SmallConfig();
  TransformerBaseline model(config, GetParam(), 3);
  const auto tokens = testing::RandomTokens(150, config.vocab_size, 4);
  std::vector<float> full, step;

  TransformerBaseline::Sequence whole = model.NewSequence();
  TransformerBaseline::Sequence* w = &whole;
  absl::Span<const int32_t> all = tokens;
  ASSERT_TRUE(model.Forward({&w, 1}, {&all, 1}, &full).ok());

  TransformerBaseline::Sequence a = model.NewSequence(), b = model.NewSequence();
  TransformerBaseline::Sequence* pa = &a;
  absl::Span<const int32_t> prefix = absl::MakeConstSpan(tokens).subspan(0, 140);
  ASSERT_TRUE(model.Forward({&pa, 1}, {&prefix, 1}, &step).ok());
  b = a;
  for (size_t t = 140; t < tokens.size(); ++t) {
    // a and b decode the same token together; a's row must equal b's.
    TransformerBaseline::Sequence* both[] = {&a, &b};
    absl::Span<const int32_t> one(&tokens[t], 1);
    absl::Span<const int32_t> spans[] = {one, one};
    ASSERT_TRUE(model.Forward(both, spans, &step).ok());
    const int64_t V = config.vocab_size;
    EXPECT_EQ(std::vector<float>(step.begin(), step.begin() + V),
              std::vector<float>(step.begin() + V, step.end()));
  }
  step.resize(config.vocab_size);
  double max_ref = 0;
  for (float x : full) max_ref = std::max(max_ref, static_cast<double>(std::fabs(x)));
  EXPECT_LE(MaxAbsDiff(step, full), 1e-4 * max_ref);
  EXPECT_EQ(a.position, 150);
  EXPECT_EQ(a.bytes(), int64_t{config.n_layers} * 2 * 150 * config.kv_dim() * 4);

  const int32_t bad = config.vocab_size;
  absl::Span<const int32_t> bad_span(&bad, 1);
  EXPECT_EQ(model.Forward({&pa, 1}, {&bad_span, 1}, &step).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Weights, TransformerBaselineTest,
                         ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                           WeightFormat::kQ8),
                         [](const auto& info) {
                           return std::string(WeightFormatName(info.param));
                         });

}  // namespace
}  // namespace yoco
