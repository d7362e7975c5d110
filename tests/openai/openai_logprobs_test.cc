// OpenAI's logprobs shapes from the router's tokens: chat entries with bytes and alternatives,
// the legacy arrays with character offsets and the chosen token among the alternatives, token
// names for special ids and part-characters, and entries handed out once each.
#include "lib/openai/openai_logprobs.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

using json = nlohmann::json;

v1::TokenLogprob Logprob(int32_t id, const std::string& bytes, float logprob) {
  v1::TokenLogprob t;
  t.set_id(id);
  t.set_token(bytes);
  t.set_logprob(logprob);
  return t;
}

// A token the router sent: its text (what it completes) and bytes may differ.
v1::GeneratedToken Token(int32_t id, const std::string& text, const std::string& bytes,
                         float logprob, std::vector<v1::TokenLogprob> top = {}) {
  v1::GeneratedToken token;
  token.set_id(id);
  token.set_text(text);
  *token.mutable_logprob() = Logprob(id, bytes, logprob);
  for (v1::TokenLogprob& t : top) *token.add_top_logprobs() = t;
  return token;
}

TEST(OpenAiLogprobsTest, TokenNamesSpellTextPartCharactersAndSpecials) {
  EXPECT_EQ(TokenName(Logprob(70, "ab", 0)), "ab");
  EXPECT_EQ(TokenName(Logprob(70, "\xC3\xA9", 0)), "\xC3\xA9");
  EXPECT_EQ(TokenName(Logprob(70, "\xC3", 0)), "bytes:\\xc3");
  EXPECT_EQ(TokenName(Logprob(70, "a\xE2\x82", 0)), "bytes:\\x61\\xe2\\x82");
  EXPECT_EQ(TokenName(Logprob(0, "", 0)), "<s>");
  EXPECT_EQ(TokenName(Logprob(2, "", 0)), "</s>");
  EXPECT_EQ(TokenName(Logprob(600, "", 0)), "");  // beyond what the tokenizer spells
}

TEST(OpenAiLogprobsTest, ChatEntriesCarryBytesAndAlternatives) {
  OpenAiLogprobs logprobs(/*chat=*/true, /*asked=*/true);
  logprobs.Add(Token(72, "", "\xC3", -0.5f, {Logprob(72, "\xC3", -0.5f), Logprob(2, "", -1.25f)}));
  logprobs.Add(Token(73, "\xC3\xA9", "\xA9", -0.25f));
  EXPECT_EQ(logprobs.Take(), json::parse(R"({"refusal": null, "content": [
      {"token": "bytes:\\xc3", "logprob": -0.5, "bytes": [195], "top_logprobs": [
          {"token": "bytes:\\xc3", "logprob": -0.5, "bytes": [195]},
          {"token": "</s>", "logprob": -1.25, "bytes": null}]},
      {"token": "bytes:\\xa9", "logprob": -0.25, "bytes": [169], "top_logprobs": []}]})"));
  // Taken once: the next chunk has only what came after.
  EXPECT_EQ(logprobs.Take(), json::parse(R"({"refusal": null, "content": []})"));
}

TEST(OpenAiLogprobsTest, LegacyArraysHoldTheChosenTokenAndCharacterOffsets) {
  OpenAiLogprobs logprobs(/*chat=*/false, /*asked=*/true);
  logprobs.Add(Token(80, "h\xC3\xA9", "h\xC3\xA9", -1.0f, {Logprob(81, "x", -0.5f)}));
  EXPECT_EQ(logprobs.Take()["text_offset"], json::parse("[0]"));
  logprobs.Add(Token(82, "y", "y", -2.0f, {Logprob(81, "x", -0.5f), Logprob(83, "z", -0.75f)}));
  EXPECT_EQ(logprobs.Take(), json::parse(R"({"tokens": ["y"], "token_logprobs": [-2.0],
      "top_logprobs": [{"x": -0.5, "z": -0.75, "y": -2.0}], "text_offset": [2]})"));
}

TEST(OpenAiLogprobsTest, AnEchoedPromptsFirstTokenHasNone) {
  v1::ScoreResponse scored;
  v1::GeneratedToken* bos = scored.add_tokens();
  bos->set_id(0);
  *scored.add_tokens() = Token(80, "h\xC3\xA9", "h\xC3\xA9", -3.0f, {Logprob(81, "x", -0.5f)});
  *scored.add_tokens() = Token(82, "y", "y", -2.0f);
  EXPECT_EQ(EchoLogprobsJson(scored, true), json::parse(R"({"tokens": ["<s>", "hé", "y"],
      "token_logprobs": [null, -3.0, -2.0], "top_logprobs": [null, {"x": -0.5, "hé": -3.0},
      {"y": -2.0}], "text_offset": [0, 0, 2]})"));
  EXPECT_TRUE(EchoLogprobsJson(scored, false).is_null());
}

TEST(OpenAiLogprobsTest, NotAskedGivesNull) {
  OpenAiLogprobs logprobs(/*chat=*/true, /*asked=*/false);
  logprobs.Add(Token(72, "a", "a", -0.5f));
  EXPECT_TRUE(logprobs.Take().is_null());
}

}  // namespace
}  // namespace yoco
