// SamplingParams checks.
#include "lib/model/sampling_params.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace yoco {

absl::Status SamplingParams::Validate(int vocab_size) const {
  if (std::isnan(temperature) || temperature < 0.0f || std::isinf(temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be a finite number >= 0, got ", temperature));
  }
  if (top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
  }
  if (logprobs < -1 || logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs must be in [0, ", kMaxTopLogprobs, "], got ", logprobs));
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, bias] = logit_bias[i];
    if (id < 0 || id >= vocab_size || (i > 0 && id <= logit_bias[i - 1].first)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", id,
                                                     " is outside the vocabulary [0, ", vocab_size,
                                                     ") or repeated"));
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: the bias of token ", id, " must be in [-100, 100]"));
    }
  }
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be in (0, 10], got ", repetition_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency_penalty must be in [-2, 2], got ", frequency_penalty));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("presence_penalty must be in [-2, 2], got ", presence_penalty));
  }
  if (min_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens must be >= 0, got ", min_tokens));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", min_p));
  }
  if (int{json_object} + int{!json_schema.empty()} + int{!regex.empty()} > 1) {
    return absl::InvalidArgumentError(
        "response_format is one of json_object, json_schema and regex");
  }
  if (regex.size() > kMaxRegexBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex has ", regex.size(), " bytes; at most ", kMaxRegexBytes));
  }
  if (json_schema.size() > kMaxJsonSchemaBytes) {
    return absl::InvalidArgumentError(absl::StrCat("json_schema has ", json_schema.size(),
                                                   " bytes; at most ", kMaxJsonSchemaBytes));
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

TokenStop StopAfter(const SamplingParams& sampling, bool stop_at_eos, int32_t token) {
  const std::vector<int32_t>& stops = sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return TokenStop::kStopToken;
  if (stop_at_eos && token == kEosId) return TokenStop::kEos;
  return TokenStop::kNone;
}

uint64_t ChoiceSeed(uint64_t seed, uint32_t choice) {
  if (choice == 0) return seed;
  // SplitMix64's finaliser over the seed offset by the choice's own odd stride: distinct
  // choices give unrelated seeds.
  uint64_t z = seed + (uint64_t{choice} * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace yoco
