// RegexConstraint: its masks (kept per pattern state) equal feeding each token alone, tokens that
// split a character included; and 300 answers the engine samples under patterns all match them
// whole by std::regex.
#include "lib/grammar/regex_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/grammar/regex.h"
#include "lib/text/byte_tokenizer.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

std::shared_ptr<const RegexMasks> Masks(const char* pattern,
                                        std::shared_ptr<const TokenVocabulary> vocabulary) {
  absl::StatusOr<CharDfa> dfa = CompileRegex(pattern);
  EXPECT_TRUE(dfa.ok()) << dfa.status();
  return std::make_shared<RegexMasks>(*std::move(dfa), std::move(vocabulary));
}

TEST(RegexConstraintTest, MasksEqualFeedingEachTokenAloneAndStayTheSameFromTheCache) {
  std::mt19937 rng(8);
  std::vector<std::string> tokens = {"", "", ""};  // specials (2: the end)
  // "é" split across tokens too: \xc3 alone, \xa9 alone.
  const std::vector<std::string> pieces = {
      "a", "b", "1", "2", "-", " ", "\xc3", "\xa9", "\xc3\xa9", "\xce\xb1", "\xe2\x82\xac", "x"};
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) t += pieces[rng() % pieces.size()];
    tokens.push_back(t);
  }
  auto vocabulary = std::make_shared<const TokenVocabulary>(tokens);
  for (const char* pattern : {"[ab]+-[0-9]{1,3}", "(é|α)+ ?€?", ".{2,5}", "a|b1|b2 x"}) {
    SCOPED_TRACE(pattern);
    auto masks = Masks(pattern, vocabulary);
    for (int run = 0; run < 20; ++run) {
      RegexConstraint constraint(masks, 2);
      for (int step = 0; step < 12; ++step) {
        std::vector<float> logits(tokens.size(), 0.0f);
        constraint.Mask(absl::MakeSpan(logits));
        std::vector<int32_t> allowed;
        for (int32_t id = 3; id < static_cast<int32_t>(tokens.size()); ++id) {
          CharDfa::Cursor alone = constraint.cursor();
          const bool takes = masks->dfa().Walk(&alone, tokens[id]);
          ASSERT_EQ(!std::isinf(logits[id]), takes) << "token '" << tokens[id] << "'";
          if (takes) allowed.push_back(id);
        }
        const bool end = !std::isinf(logits[2]);
        EXPECT_EQ(end, masks->dfa().Accepting(constraint.cursor()) || allowed.empty());
        if (allowed.empty() || (end && rng() % 3 == 0)) break;
        constraint.Accept(allowed[rng() % allowed.size()]);
      }
    }
  }
}

TEST(RegexConstraintTest, SampledAnswersMatchTheirPatternWhole) {
  ModelConfig config = testing::SmallConfig();
  config.vocab_size = 300;
  std::shared_ptr<const Model> model = testing::MakeModel(config, 52, "regex_constrained");
  ASSERT_NE(model, nullptr);
  CpuBackend backend(model);
  const ByteTokenizer tokenizer;
  auto vocabulary =
      std::make_shared<const TokenVocabulary>(TokenBytes(tokenizer, config.vocab_size));
  const char* patterns[] = {"(yes|no|maybe): [A-Z][a-z]{2,8}( [0-9]{1,3})?\\.",
                            "[0-9]{4}-[0-9]{2}-[0-9]{2}", "\\w{1,10}@[a-z]{2,5}\\.(com|org)",
                            "[^\\n\\r]{3,12}"};
  for (int i = 0; i < 300; ++i) {
    const char* pattern = patterns[i % 4];
    RegexConstraint constraint(Masks(pattern, vocabulary), kEosId);
    SamplingParams s;
    s.temperature = 1.0f;
    s.seed = static_cast<uint64_t>(i);
    PrefillOptions options;
    options.constraint = &constraint;
    int32_t first = -1;
    absl::StatusOr<Generation> gen =
        Generation::Prefill(backend, testing::RandomTokens(6 + i % 10, 250, i), s, &first, options);
    ASSERT_TRUE(gen.ok()) << gen.status();
    std::vector<int32_t> tokens = {first};
    while (tokens.back() != kEosId && tokens.size() < 100) tokens.push_back(*gen->Next(backend));
    ASSERT_EQ(tokens.back(), kEosId);
    tokens.pop_back();
    absl::StatusOr<std::string> text = tokenizer.Decode(tokens);
    ASSERT_TRUE(text.ok());
    // [^\n\r] reads bytes in std::regex: count the answer's code points instead.
    if (i % 4 == 3) {
      int64_t chars = 0;
      for (unsigned char c : *text) chars += (c & 0xc0) != 0x80;
      EXPECT_TRUE(chars >= 3 && chars <= 12 && text->find_first_of("\n\r") == std::string::npos)
          << *text;
      continue;
    }
    EXPECT_TRUE(std::regex_match(*text, std::regex(pattern, std::regex::ECMAScript)))
        << pattern << ": " << *text;
  }
}

}  // namespace
}  // namespace yoco
