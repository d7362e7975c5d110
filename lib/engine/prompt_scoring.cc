// Prompt scoring: full-forward segments, each position's logits turned into the logprobs of
// the token that follows it.
#include "lib/engine/prompt_scoring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/engine/generation.h"
#include "lib/engine/logprobs.h"
#include "lib/status/status_macros.h"

namespace yoco {

absl::StatusOr<std::vector<TokenLogprobs>> ScorePrompt(Backend& backend,
                                                       absl::Span<const int32_t> tokens,
                                                       const ScoreOptions& options) {
  const ModelConfig& config = backend.model().config();
  RETURN_IF_ERROR(CheckPrompt(config, tokens));
  if (options.top_logprobs < 0 || options.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs, "]"));
  }
  const int64_t vocab = config.vocab_size;
  const int64_t segment = std::max<int64_t>(1, options.logits_floats / vocab);
  // The last token predicts nothing the prompt holds: it needs no logits.
  const int64_t scored = static_cast<int64_t>(tokens.size()) - 1;
  std::vector<TokenLogprobs> out;
  out.reserve(static_cast<size_t>(scored));
  SequenceState state = SequenceState::Create(config);
  std::vector<float> logits;
  for (int64_t from = 0; from < scored; from += segment) {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("the scoring was cancelled");
    }
    const int64_t n = std::min(segment, scored - from);
    ForwardSegment seg{&state, tokens.subspan(from, n), LogitsMode::kAll};
    RETURN_IF_ERROR(backend.Forward({&seg, 1}, &logits));
    for (int64_t r = 0; r < n; ++r) {
      absl::Span<const float> row(logits.data() + r * vocab, vocab);
      RETURN_IF_ERROR(CheckFinite(row, from + r));
      out.push_back(LogprobsOf(row, tokens[from + r + 1], options.top_logprobs));
    }
  }
  return out;
}

}  // namespace yoco
