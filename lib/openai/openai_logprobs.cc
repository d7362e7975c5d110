// OpenAI logprobs entries.
#include "lib/openai/openai_logprobs.h"

#include "absl/strings/str_format.h"
#include "lib/text/tokenizer.h"
#include "lib/text/utf8_stream.h"

namespace yoco {

using json = nlohmann::json;

std::string TokenName(const v1::TokenLogprob& token) {
  static constexpr const char* kSpecial[kTokenizerIdOffset] = {"<s>", "<pad>", "</s>", "<unk>"};
  if (token.id() >= 0 && token.id() < kTokenizerIdOffset) return kSpecial[token.id()];
  const std::string& bytes = token.token();
  if (ToValidUtf8(bytes) == bytes) return bytes;
  std::string name = "bytes:";
  for (const char c : bytes) absl::StrAppendFormat(&name, "\\x%02x", static_cast<unsigned char>(c));
  return name;
}

namespace {

// The token's bytes as numbers; null when it has none (a special id).
json BytesJson(const v1::TokenLogprob& token) {
  if (token.token().empty()) return nullptr;
  json bytes = json::array();
  for (const char c : token.token()) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

// The legacy shape always holds the chosen token among the alternatives ("up to logprobs + 1
// elements").
json LegacyAlternatives(const v1::GeneratedToken& token) {
  json alternatives = json::object();
  for (const v1::TokenLogprob& t : token.top_logprobs()) alternatives[TokenName(t)] = t.logprob();
  alternatives[TokenName(token.logprob())] = token.logprob().logprob();
  return alternatives;
}

size_t Characters(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

json EchoLogprobsJson(const v1::ScoreResponse& scored, bool with_logprobs) {
  if (!with_logprobs) return nullptr;
  json tokens = json::array(), logprobs = json::array(), top = json::array();
  std::vector<size_t> offsets;
  size_t chars = 0;
  for (const v1::GeneratedToken& token : scored.tokens()) {
    offsets.push_back(chars);
    chars += Characters(token.text());
    if (!token.has_logprob()) {  // the first: nothing precedes it
      v1::TokenLogprob named;
      named.set_id(token.id());
      named.set_token(token.text());
      tokens.push_back(TokenName(named));
      logprobs.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    tokens.push_back(TokenName(token.logprob()));
    logprobs.push_back(token.logprob().logprob());
    top.push_back(LegacyAlternatives(token));
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

void OpenAiLogprobs::Add(const v1::GeneratedToken& token) {
  if (asked_ && token.has_logprob()) {
    pending_.push_back(token);
    offsets_.push_back(text_chars_);
  }
  text_chars_ += Characters(token.text());
}

json OpenAiLogprobs::ChatEntry(const v1::GeneratedToken& token) const {
  json top = json::array();
  for (const v1::TokenLogprob& t : token.top_logprobs()) {
    top.push_back({{"token", TokenName(t)}, {"logprob", t.logprob()}, {"bytes", BytesJson(t)}});
  }
  return {{"token", TokenName(token.logprob())},
          {"logprob", token.logprob().logprob()},
          {"bytes", BytesJson(token.logprob())},
          {"top_logprobs", top}};
}

json OpenAiLogprobs::Take() {
  if (!asked_) return nullptr;
  json out;
  if (chat_) {
    json content = json::array();
    for (const v1::GeneratedToken& token : pending_) content.push_back(ChatEntry(token));
    out = {{"content", content}, {"refusal", nullptr}};
  } else {
    json tokens = json::array(), logprobs = json::array(), top = json::array();
    for (const v1::GeneratedToken& token : pending_) {
      tokens.push_back(TokenName(token.logprob()));
      logprobs.push_back(token.logprob().logprob());
      top.push_back(LegacyAlternatives(token));
    }
    out = {{"tokens", tokens},
           {"token_logprobs", logprobs},
           {"top_logprobs", top},
           {"text_offset", offsets_}};
  }
  pending_.clear();
  offsets_.clear();
  return out;
}

}  // namespace yoco
