// TokenVocabulary's flat trie and MaskLogits against the plain definitions: a token is allowed
// when feeding its bytes alone continues the text; a refused logit is -inf.
#include "lib/grammar/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lib/grammar/regex.h"

namespace yoco {
namespace {

TEST(TokenVocabularyTest, TrieMasksEqualEachTokenAloneWithDuplicatesAndLongTokens) {
  std::mt19937 rng(11);
  std::vector<std::string> tokens = {"", "", "ab", "ab", std::string(1500, 'a'), "a"};
  const std::string letters = "ab-\xc3\xa9";
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    for (int n = 1 + static_cast<int>(rng() % 9); n > 0; --n) t += letters[rng() % letters.size()];
    tokens.push_back(t);
  }
  const TokenVocabulary vocabulary(tokens);
  absl::StatusOr<CharDfa> dfa = CompileRegex("(a|b|é)*-?(ab){0,40}");
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  for (const char* text : {"", "a", "ab-", "\xc3", "é", "-abab"}) {
    SCOPED_TRACE(text);
    CharDfa::Cursor at = dfa->Start();
    ASSERT_TRUE(dfa->Walk(&at, text));
    const TokenBits bits = vocabulary.Allowed(*dfa, at);
    int allowed = 0;
    for (int32_t id = 0; id < vocabulary.size(); ++id) {
      CharDfa::Cursor alone = at;
      const bool takes = !tokens[id].empty() &&
                         tokens[id].size() <= TokenVocabulary::kMaxTokenBytes &&
                         dfa->Walk(&alone, tokens[id]);
      ASSERT_EQ(HasToken(bits, id), takes) << "token " << id << " '" << tokens[id] << "'";
      allowed += takes;
    }
    EXPECT_GT(allowed, 0);
  }
  // Both ids of one text are allowed; a text too long for the trie never is.
  const TokenBits start = vocabulary.Allowed(*dfa, dfa->Start());
  EXPECT_TRUE(HasToken(start, 2) && HasToken(start, 3));
  EXPECT_FALSE(HasToken(start, 4));
  EXPECT_TRUE(HasToken(start, 5));
}

TEST(MaskLogitsTest, EqualsThePlainRule) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t vocabulary_size = 1 + static_cast<int32_t>(rng() % 300);
    const size_t n = vocabulary_size + rng() % 70;  // the model's rows may outnumber the tokens
    TokenBits bits((vocabulary_size + 63) / 64, 0);
    const int density = static_cast<int>(rng() % 4);  // none, few, half, all
    for (int32_t id = 0; id < vocabulary_size; ++id) {
      const bool on =
          density == 3 || (density == 2 && rng() % 2) || (density == 1 && !(rng() % 20));
      if (on) bits[id / 64] |= uint64_t{1} << (id % 64);
    }
    const bool null_bits = rng() % 10 == 0;
    const int32_t end_id = static_cast<int32_t>(rng() % (n + 1)) - 1;  // -1: none
    const bool may_end = rng() % 2;
    std::vector<float> logits(n);
    for (float& l : logits) l = static_cast<float>(rng() % 1000) / 10.0f;
    std::vector<float> masked = logits;
    MaskLogits(null_bits ? nullptr : &bits, vocabulary_size, end_id, may_end,
               absl::MakeSpan(masked));
    bool any = false;
    for (int32_t id = 0; id < vocabulary_size && !null_bits; ++id) any |= HasToken(bits, id);
    for (size_t id = 0; id < n; ++id) {
      const int32_t i = static_cast<int32_t>(id);
      const bool allowed =
          i == end_id ? may_end || !any : any && i < vocabulary_size && HasToken(bits, i);
      ASSERT_EQ(masked[id], allowed ? logits[id] : -INFINITY) << "trial " << trial << " id " << id;
    }
  }
}

}  // namespace
}  // namespace yoco
