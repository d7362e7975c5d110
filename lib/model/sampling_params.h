// SamplingParams: what a request asks of the sampler, and the special token ids every layer
// (engine, workers, router, HTTP front) agrees on. Validated where a request enters, so the
// router refuses a bad request before any worker sees it.
#ifndef YOCO_LIB_MODEL_SAMPLING_PARAMS_H_
#define YOCO_LIB_MODEL_SAMPLING_PARAMS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace yoco {

// Ids the reference never samples: BOS (0) and PAD (1) get −inf logits before the choice.
inline constexpr int32_t kBosId = 0;
inline constexpr int32_t kPadId = 1;
inline constexpr int32_t kEosId = 2;

// The most alternatives a request may ask log-probabilities for (OpenAI's top_logprobs bound).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest most-likely set with mass >= top_p; 1: all
  uint64_t seed = 0;         // draws depend only on (seed, position)
  std::vector<int32_t> stop_token_ids;  // generation ends after emitting one of these
  // Adjustments of the logits before the draw, each a pure function of the tokens so far (a
  // TokenHistory), so a request resumed elsewhere draws the same tokens. In the order applied:
  // logit_bias (added to its ids' logits), repetition_penalty (> 1 discourages every id of the
  // prompt or the output: a positive logit divided by it, a negative one multiplied; 1: off),
  // frequency_penalty (subtracted once per time an id was generated) and presence_penalty (once
  // for an id generated at all), then min_tokens (EOS and the stop ids cannot be drawn before
  // that many tokens were generated). min_p keeps, after top_k and top_p, the candidates at
  // least min_p times as likely as the most likely one (0: off).
  std::vector<std::pair<int32_t, float>> logit_bias;  // ids ascending, each once
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t min_tokens = 0;
  float min_p = 0.0f;
  // Log-probabilities reported with each token (TokenLogprobs): -1 none; 0 the chosen token's;
  // N in [1, kMaxTopLogprobs] also those of the N most likely tokens. The draw ignores it, and
  // state bundles do not carry it (a decode call says it again).
  int32_t logprobs = -1;
  // Structured output (LogitConstraint): any JSON object, a JSON Schema's text, or a regular
  // expression the whole answer matches. The draw honours it only where a constraint is built
  // from it (the workers do).
  bool json_object = false;
  std::string json_schema;
  std::string regex;
  bool Constrained() const { return json_object || !json_schema.empty() || !regex.empty(); }

  // Whether any adjustment of the logits is asked for (then the sampler needs a TokenHistory).
  bool AdjustsLogits() const {
    return !logit_bias.empty() || repetition_penalty != 1.0f || frequency_penalty != 0.0f ||
           presence_penalty != 0.0f || min_tokens > 0;
  }

  // INVALID_ARGUMENT for NaN/negative temperature, top_k < 0, top_p outside (0, 1], stop ids
  // outside [0, vocab_size), logprobs outside [-1, kMaxTopLogprobs], a bias id outside the
  // vocabulary (or twice, or out of order) or beyond [-100, 100], penalties outside OpenAI's
  // ranges ([-2, 2]; repetition (0, 10]), min_tokens < 0, or min_p outside [0, 1].
  absl::Status Validate(int vocab_size) const;
  bool operator==(const SamplingParams&) const = default;
};

// The longest JSON Schema text and regular expression a request may constrain its answer with.
inline constexpr size_t kMaxJsonSchemaBytes = 64 * 1024;
inline constexpr size_t kMaxRegexBytes = 4 * 1024;

// The most choices (samples of one prompt, OpenAI's `n`) a request may ask for.
inline constexpr int32_t kMaxChoices = 16;

// The seed choice `choice` of a request draws with: `seed` itself for choice 0 (so n = 1 and a
// request's first choice agree), a mix of both otherwise. Every layer derives it here, so a
// whole multi-choice response is reproducible from the request's seed, and choice i equals a
// one-choice request of seed ChoiceSeed(seed, i).
uint64_t ChoiceSeed(uint64_t seed, uint32_t choice);

// Whether emitting `token` ends a generation, and why. A stop id the caller named wins over EOS
// (both report "stop" then, as the reference does). Every layer that decides where a stream ends
// (engine, prefill worker, decode batch, router) asks this, so they cannot disagree.
enum class TokenStop { kNone, kStopToken, kEos };
TokenStop StopAfter(const SamplingParams& sampling, bool stop_at_eos, int32_t token);

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_SAMPLING_PARAMS_H_
