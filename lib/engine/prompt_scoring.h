// ScorePrompt: the log-probability of every token of a prompt given the tokens before it, as
// evaluation harnesses and rerankers ask (OpenAI's echo + logprobs, the Score RPC). A prefill
// runs the cross-decoder only for the prompt's last position; scoring runs it for every
// position, a segment at a time, so memory for logits stays bounded whatever the length.
#ifndef YOCO_LIB_ENGINE_PROMPT_SCORING_H_
#define YOCO_LIB_ENGINE_PROMPT_SCORING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/engine/backend.h"
#include "lib/model/token_logprobs.h"

namespace yoco {

struct ScoreOptions {
  int top_logprobs = 0;  // the most likely tokens' too, at each position: [0, kMaxTopLogprobs]
  // Logits held at once, in floats: segments are cut to fit it (at least one row).
  int64_t logits_floats = int64_t{8} << 20;
  std::function<bool()> cancelled;  // checked before every segment: CANCELLED
};

// tokens[i]'s logprobs given tokens[0, i), for i in [1, size): size - 1 entries. INVALID_ARGUMENT
// for a prompt the engine refuses (CheckPrompt) or top_logprobs out of range; DATA_LOSS for
// non-finite logits.
absl::StatusOr<std::vector<TokenLogprobs>> ScorePrompt(Backend& backend,
                                                       absl::Span<const int32_t> tokens,
                                                       const ScoreOptions& options);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_PROMPT_SCORING_H_
