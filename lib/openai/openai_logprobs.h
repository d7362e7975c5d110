// OpenAI's shapes for the log-probabilities of generated tokens (GeneratedToken.logprob and
// top_logprobs from the router): chat's {"content": [{token, logprob, bytes, top_logprobs}]} and
// the legacy completions' {tokens, token_logprobs, top_logprobs, text_offset}. A streamed
// response sends each token's entry with the chunk that shows its text, so entries are collected
// as tokens come and taken when a chunk (or the whole response) goes out.
#ifndef YOCO_LIB_OPENAI_OPENAI_LOGPROBS_H_
#define YOCO_LIB_OPENAI_OPENAI_LOGPROBS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

// A token as the entries name it: its text when its bytes are valid UTF-8, "bytes:\xNN..."
// otherwise (vLLM's spelling of part of a character), the reserved names of the special ids
// (<s>, <pad>, </s>, <unk>).
std::string TokenName(const v1::TokenLogprob& token);

// The legacy completions shape for an echoed prompt (Score): its first token has no logprob
// (null), and `with_logprobs` false gives null (the request asked for the text only).
nlohmann::json EchoLogprobsJson(const v1::ScoreResponse& scored, bool with_logprobs);

class OpenAiLogprobs {
 public:
  // `asked`: the request asked for logprobs (otherwise every Take gives null).
  OpenAiLogprobs(bool chat, bool asked) : chat_(chat), asked_(asked) {}

  // A token the router streamed; one without logprobs (none asked) is only counted in the
  // legacy text offsets.
  void Add(const v1::GeneratedToken& token);
  // The entries added since the last Take in the request's shape; null when none were asked.
  nlohmann::json Take();

 private:
  nlohmann::json ChatEntry(const v1::GeneratedToken& token) const;

  const bool chat_;
  const bool asked_;
  std::vector<v1::GeneratedToken> pending_;
  std::vector<size_t> offsets_;  // legacy: the character where each pending token's text starts
  size_t text_chars_ = 0;        // of the router's text so far
};

}  // namespace yoco

#endif  // YOCO_LIB_OPENAI_OPENAI_LOGPROBS_H_
