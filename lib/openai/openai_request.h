// The OpenAI API's completion and chat-completion request bodies, checked and turned into the
// router's GenerateRequest. Every refusal is INVALID_ARGUMENT with a message that starts with
// the offending field, which RequestParam() also returns for the error's "param".
#ifndef YOCO_LIB_OPENAI_OPENAI_REQUEST_H_
#define YOCO_LIB_OPENAI_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/openai/chat_template.h"
#include "lib/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

struct OpenAiDefaults {
  uint32_t completion_max_tokens = 16;  // OpenAI's default for /v1/completions
  uint32_t chat_max_tokens = 256;       // capped by what is left of max_seq_len
  int max_seq_len = -1;                 // the model's; -1: no limit
};

struct OpenAiGenerate {
  bool chat = false;
  v1::GenerateRequest request;
  std::string model;  // as the request names it; "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions: the prompt scored (Score), nothing generated; its text and, with logprobs,
  // every prompt token's logprob are the answer (max_tokens 0, not streamed).
  bool echo = false;
  uint32_t choices = 1;  // n: the choices answered
  // Completions: the candidates generated (request.sampling.n), of which the `choices` with the
  // highest sum of token logprobs are answered. Logprobs are then always asked of the router,
  // and shown only when the client asked for them too.
  uint32_t best_of = 1;
  bool logprobs_shown = true;
  // Tokens whose text never shows (the chat template's end of message).
  std::vector<int32_t> hidden_token_ids;
};

// A /v1/completions body. `seed_if_absent` is used when the request has no seed.
absl::StatusOr<OpenAiGenerate> ParseCompletionRequest(absl::string_view body,
                                                      const OpenAiDefaults& defaults,
                                                      uint64_t seed_if_absent);

// A /v1/chat/completions body: its messages rendered by `chat_template` (null: the model has
// none, and the request is refused).
absl::StatusOr<OpenAiGenerate> ParseChatRequest(absl::string_view body,
                                                const ChatTemplate* chat_template,
                                                const Tokenizer& tokenizer,
                                                const OpenAiDefaults& defaults,
                                                uint64_t seed_if_absent);

// Appends the JSON array `ids` (token ids in [0, 2^31)) to `out`; a refusal naming `param`.
absl::Status AppendTokenIds(const nlohmann::json& ids, absl::string_view param, v1::TokenIds* out);

// Any other JSON body: an object, within the same nesting and size limits.
absl::StatusOr<nlohmann::json> ParseRequestObject(absl::string_view body);

// A refusal naming `param`.
absl::Status ParamError(absl::string_view param, absl::string_view problem);
// The field a refusal names; "" when none.
std::string RequestParam(const absl::Status& status);

}  // namespace yoco

#endif  // YOCO_LIB_OPENAI_OPENAI_REQUEST_H_
