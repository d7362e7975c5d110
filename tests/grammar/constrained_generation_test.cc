// Structured output on the engine: 1000 samples of a random-weight model under a schema, each
// parsed and validated by the reference; a constrained sequence resumed from a bundle (its rule
// rebuilt from the tokens so far) draws as one that ran straight through; and each choice of a
// constrained prefill draws as a one-choice prefill of its seed.
#include <gtest/gtest.h>

#include <memory>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/grammar/json_constraint.h"
#include "lib/text/byte_tokenizer.h"
#include "tests/engine/test_models.h"
#include "tests/grammar/schema_reference.h"

namespace yoco {
namespace {

using json = nlohmann::json;

class ConstrainedGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig config = testing::SmallConfig();
    config.vocab_size = 300;  // the byte tokenizer's ids and some it never writes
    model_ = testing::MakeModel(config, 51, "constrained");
    ASSERT_NE(model_, nullptr);
    backend_ = std::make_unique<CpuBackend>(model_);
    vocabulary_ = std::make_shared<TokenVocabulary>(TokenBytes(ByteTokenizer(), config.vocab_size));
  }

  std::unique_ptr<JsonConstraint> Constraint(const char* schema_text) {
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(schema_text);
    EXPECT_TRUE(schema.ok()) << schema.status();
    return std::make_unique<JsonConstraint>(std::make_shared<JsonSchema>(*std::move(schema)),
                                            vocabulary_, kEosId);
  }

  std::string Text(const std::vector<int32_t>& tokens) {
    std::string text;
    for (int32_t t : tokens) {
      if (t != kEosId) text += vocabulary_->bytes(t);
    }
    return text;
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<CpuBackend> backend_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
};

TEST_F(ConstrainedGenerationTest, AThousandSamplesParseAndValidate) {
  // The schemas whose every string and array is bounded: a random model then ends each value.
  const int bounded[] = {0, 1, 2, 5, 6};
  int samples = 0;
  for (int i = 0; samples < 1000; ++i) {
    const char* text = testing::kSchemas[bounded[i % 5]];
    const std::unique_ptr<JsonConstraint> constraint = Constraint(text);
    SamplingParams s;
    s.temperature = 1.0f;
    s.seed = static_cast<uint64_t>(i);
    PrefillOptions options;
    options.constraint = constraint.get();
    int32_t first = -1;
    absl::StatusOr<Generation> gen = Generation::Prefill(
        *backend_, testing::RandomTokens(8 + i % 20, 300, i), s, &first, options);
    ASSERT_TRUE(gen.ok()) << gen.status();
    std::vector<int32_t> tokens = {first};
    while (tokens.back() != kEosId && tokens.size() < 600) tokens.push_back(*gen->Next(*backend_));
    ASSERT_EQ(tokens.back(), kEosId) << text << "\n" << Text(tokens);
    const std::string written = Text(tokens);
    const json doc = json::parse(written, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << written;
    EXPECT_TRUE(testing::Valid(json::parse(text), json::parse(text), doc)) << text << "\n"
                                                                           << written;
    ++samples;
  }
}

TEST_F(ConstrainedGenerationTest, AResumedSequenceAndEachChoiceDrawAsStraightRuns) {
  const char* text = testing::kSchemas[0];
  const std::vector<int32_t> prompt = testing::RandomTokens(30, 300, 4);
  SamplingParams s;
  s.temperature = 0.9f;
  s.seed = 77;
  const std::unique_ptr<JsonConstraint> constraint = Constraint(text);
  PrefillOptions options;
  options.constraint = constraint.get();
  int32_t first = -1;
  absl::StatusOr<Generation> straight = Generation::Prefill(*backend_, prompt, s, &first, options);
  ASSERT_TRUE(straight.ok());
  const std::vector<ChoiceDraw> draws = straight->DrawChoices({0, 1, 2, 3});
  std::vector<int32_t> want = {first};
  for (int t = 0; t < 25 && want.back() != kEosId; ++t) want.push_back(*straight->Next(*backend_));

  // A decode worker's side: the bundle, a rule rebuilt from the first token, 4 more replayed.
  absl::StatusOr<Generation> prefilled = Generation::Prefill(*backend_, prompt, s, &first, options);
  ASSERT_TRUE(prefilled.ok());
  absl::StatusOr<Generation> resumed = Generation::FromBundle(prefilled->ToBundle(0));
  ASSERT_TRUE(resumed.ok());
  std::unique_ptr<JsonConstraint> rebuilt = Constraint(text);
  rebuilt->Accept(want[0]);
  resumed->set_constraint(std::move(rebuilt));
  resumed->set_replay({want.begin() + 1, want.begin() + 5});
  std::vector<int32_t> got = {want[0]};
  while (got.size() < want.size()) got.push_back(*resumed->Next(*backend_));
  EXPECT_EQ(got, want);

  for (const ChoiceDraw& draw : draws) {
    SamplingParams alone = s;
    alone.seed = ChoiceSeed(s.seed, draw.choice);
    int32_t one = -1;
    ASSERT_TRUE(Generation::Prefill(*backend_, prompt, alone, &one, options).ok());
    EXPECT_EQ(draw.token, one) << "choice " << draw.choice;
    EXPECT_EQ(vocabulary_->bytes(one), "{");  // the only start the schema allows
  }
}

}  // namespace
}  // namespace yoco
