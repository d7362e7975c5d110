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

}  // namespace yoco
