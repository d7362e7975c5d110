// The OpenAI API's response shapes: completions and chat completions, whole or as Server-Sent
// Events chunks, usage (always with prompt_tokens_details.cached_tokens), errors, and the HTTP
// status each status code maps to.
#ifndef YOCO_LIB_OPENAI_OPENAI_RESPONSE_H_
#define YOCO_LIB_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

// What every response and chunk of one request repeats.
struct CompletionHeader {
  bool chat = false;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// "stop" or "length".
const char* FinishReasonName(v1::FinishReason reason);

nlohmann::json UsageJson(const v1::Usage& usage);

// One choice of a whole response: its text, how it ended, its logprobs (OpenAiLogprobs).
struct CompletionChoice {
  std::string text;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  nlohmann::json logprobs = nullptr;
};

// A whole (non-streamed) response: choices[i] with index i.
nlohmann::json CompletionJson(const CompletionHeader& header,
                              const std::vector<CompletionChoice>& choices, const v1::Usage& usage);
// The same with one choice.
nlohmann::json CompletionJson(const CompletionHeader& header, const std::string& text,
                              v1::FinishReason reason, const v1::Usage& usage,
                              const nlohmann::json& logprobs = nullptr);

// One streamed chunk of choice `index`: `text` as its text or .delta.content, with the logprobs
// of its tokens; a chat choice's first chunk carries the role; a finish reason closes it.
nlohmann::json ChunkJson(const CompletionHeader& header, const std::optional<std::string>& text,
                         bool first, std::optional<v1::FinishReason> reason,
                         const nlohmann::json& logprobs = nullptr, uint32_t index = 0);

// The chunk after the last one when stream_options.include_usage: no choices, the usage.
nlohmann::json UsageChunkJson(const CompletionHeader& header, const v1::Usage& usage);

// "data: JSON\n\n"; invalid UTF-8 in strings is replaced, never thrown.
std::string SseEvent(const nlohmann::json& event);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// JSON text of a response body, with invalid UTF-8 replaced.
std::string JsonText(const nlohmann::json& body);

// The HTTP status of a refusal: 400 invalid argument, 401, 403, 404, 409, 413 (a request too
// large for the model), 429 resource exhausted, 499 cancelled, 503 unavailable, 504 deadline
// exceeded, 500 otherwise.
int HttpStatusOf(absl::StatusCode code);

// {"error": {"message", "type", "param", "code"}}: type in OpenAI's words, code the status
// code's name in lower case.
nlohmann::json ErrorJson(absl::StatusCode code, const std::string& message,
                         const std::string& param);

}  // namespace yoco

#endif  // YOCO_LIB_OPENAI_OPENAI_RESPONSE_H_
