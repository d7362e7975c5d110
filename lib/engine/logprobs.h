// LogprobsOf: a token's log-probability and the most likely tokens' (TokenLogprobs), from the
// logits the sampler drew it from.
#ifndef YOCO_LIB_ENGINE_LOGPROBS_H_
#define YOCO_LIB_ENGINE_LOGPROBS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "lib/model/token_logprobs.h"

namespace yoco {

// The log-softmax of finite `logits` [vocab] at `token` and at the `top_n` most likely ids,
// computed in double (in a fixed order: the same logits give the same bits on every worker) and
// rounded to float. REQUIRES: 0 <= token < vocab.
TokenLogprobs LogprobsOf(absl::Span<const float> logits, int32_t token, int top_n);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_LOGPROBS_H_
