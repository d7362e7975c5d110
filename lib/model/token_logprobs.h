// TokenLogprobs: the log-probabilities a request asks to see with each token (OpenAI's logprobs
// and top_logprobs; SamplingParams::logprobs). They are those of the model's own distribution:
// the log-softmax of the raw logits over the whole vocabulary, before temperature, top-k or top-p
// shape the draw (vLLM's default, "raw_logprobs"), so that they score a text whatever sampling
// produced it. Computed by the engine (LogprobsOf), carried by every layer after it.
#ifndef YOCO_LIB_MODEL_TOKEN_LOGPROBS_H_
#define YOCO_LIB_MODEL_TOKEN_LOGPROBS_H_

#include <cstdint>
#include <vector>

namespace yoco {

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first; equal logits: the lower id first
  bool operator==(const TokenLogprobs&) const = default;
};

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_TOKEN_LOGPROBS_H_
