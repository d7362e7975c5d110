// The OpenAI HTTP API's request bodies as a hostile client sends them: the bytes parsed as a
// completion and as a chat completion (first byte picks), then, when accepted, through the
// router's own request checks. What the parser accepts must be a request the checks can judge:
// max_tokens at least 1, sampling within OpenAI's ranges (logprobs at most 20), a chat prompt that
// starts with BOS and ends in the opened assistant turn.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_config.h"
#include "lib/openai/openai_request.h"
#include "lib/text/byte_tokenizer.h"
#include "services/router/request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const yoco::ByteTokenizer tokenizer;
  static const yoco::ModelConfig config = [] {
    yoco::ModelConfig c = yoco::fuzz::Config();
    c.vocab_size = 300;  // the byte tokenizer's ids and the two ChatML specials
    return c;
  }();
  static const yoco::ChatTemplate chat = *yoco::ChatTemplate::FromJson(
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 260, "<|im_end|>": 261}})",
      config);
  yoco::OpenAiDefaults defaults;
  defaults.max_seq_len = config.max_seq_len;
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool as_chat = data[0] & 1;
  absl::StatusOr<yoco::OpenAiGenerate> parsed =
      as_chat ? yoco::ParseChatRequest(body, &chat, tokenizer, defaults, 5)
              : yoco::ParseCompletionRequest(body, defaults, 5);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  const yoco::v1::SamplingParams& s = parsed->request.sampling();
  if (s.max_new_tokens() < 1 || s.temperature() < 0 || s.temperature() > 2 || s.top_p() <= 0 ||
      s.top_p() > 1 || s.top_k() < 0 ||
      (s.has_logprobs() && s.logprobs() > static_cast<uint32_t>(yoco::kMaxTopLogprobs))) {
    __builtin_trap();
  }
  if (as_chat) {
    const auto& ids = parsed->request.tokens().ids();
    if (ids.size() < 2 || ids[0] != 0 || s.stop_token_ids_size() != 1 ||
        s.stop_token_ids(0) != chat.end_of_message()) {
      __builtin_trap();
    }
  }
  (void)yoco::CheckGenerateRequest(parsed->request, config, tokenizer, 16);
  return 0;
}
