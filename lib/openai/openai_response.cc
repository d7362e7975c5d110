// OpenAI response shapes.
#include "lib/openai/openai_response.h"

#include "absl/strings/ascii.h"

namespace yoco {

using json = nlohmann::json;

const char* FinishReasonName(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

json UsageJson(const v1::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens()},
          {"completion_tokens", usage.generated_tokens()},
          {"total_tokens", usage.prompt_tokens() + usage.generated_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens()}}}};
}

namespace {

json Envelope(const CompletionHeader& header, bool chunk) {
  const char* object =
      header.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {
      {"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

json CompletionJson(const CompletionHeader& header, const std::vector<CompletionChoice>& choices,
                    const v1::Usage& usage) {
  json out = Envelope(header, false);
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const CompletionChoice& c = choices[i];
    json choice = {
        {"index", i}, {"logprobs", c.logprobs}, {"finish_reason", FinishReasonName(c.reason)}};
    if (header.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = UsageJson(usage);
  return out;
}

json CompletionJson(const CompletionHeader& header, const std::string& text,
                    v1::FinishReason reason, const v1::Usage& usage, const json& logprobs) {
  return CompletionJson(header, {{text, reason, logprobs}}, usage);
}

json ChunkJson(const CompletionHeader& header, const std::optional<std::string>& text, bool first,
               std::optional<v1::FinishReason> reason, const json& logprobs, uint32_t index) {
  json out = Envelope(header, true);
  json choice = {{"index", index}, {"logprobs", logprobs}};
  if (header.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (text.has_value()) delta["content"] = *text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text.value_or("");
  }
  choice["finish_reason"] = reason.has_value() ? json(FinishReasonName(*reason)) : json(nullptr);
  out["choices"] = json::array({choice});
  return out;
}

json UsageChunkJson(const CompletionHeader& header, const v1::Usage& usage) {
  json out = Envelope(header, true);
  out["choices"] = json::array();
  out["usage"] = UsageJson(usage);
  return out;
}

std::string JsonText(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string SseEvent(const json& event) { return "data: " + JsonText(event) + "\n\n"; }

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

json ErrorJson(absl::StatusCode code, const std::string& message, const std::string& param) {
  const int status = HttpStatusOf(code);
  const char* type = status == 400   ? "invalid_request_error"
                     : status == 401 ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                     : status == 504 ? "timeout_error"
                                     : "server_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", absl::AsciiStrToLower(absl::StatusCodeToString(code))}}}};
}

}  // namespace yoco
