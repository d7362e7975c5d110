// SamplingParams: what a request asks of the sampler, and the special token ids every layer
// (engine, workers, router, HTTP front) agrees on. Validated where a request enters, so the
// router refuses a bad request before any worker sees it.
#ifndef YOCO_LIB_MODEL_SAMPLING_PARAMS_H_
#define YOCO_LIB_MODEL_SAMPLING_PARAMS_H_

#include <cstdint>
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
  // Log-probabilities reported with each token (TokenLogprobs): -1 none; 0 the chosen token's;
  // N in [1, kMaxTopLogprobs] also those of the N most likely tokens. The draw ignores it, and
  // state bundles do not carry it (a decode call says it again).
  int32_t logprobs = -1;

  // INVALID_ARGUMENT for NaN/negative temperature, top_k < 0, top_p outside (0, 1], stop ids
  // outside [0, vocab_size), or logprobs outside [-1, kMaxTopLogprobs].
  absl::Status Validate(int vocab_size) const;
  bool operator==(const SamplingParams&) const = default;
};

// Whether emitting `token` ends a generation, and why. A stop id the caller named wins over EOS
// (both report "stop" then, as the reference does). Every layer that decides where a stream ends
// (engine, prefill worker, decode batch, router) asks this, so they cannot disagree.
enum class TokenStop { kNone, kStopToken, kEos };
TokenStop StopAfter(const SamplingParams& sampling, bool stop_at_eos, int32_t token);

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_SAMPLING_PARAMS_H_
