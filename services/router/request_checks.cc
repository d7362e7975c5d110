// Public request checks.
#include "services/router/request_checks.h"

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/auth/tenant_directory.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/regex.h"
#include "lib/rpc/proto_convert.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

constexpr char kFieldPayload[] = "yoco.invalid_field";

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  absl::Status st = absl::InvalidArgumentError(message);
  st.SetPayload(kFieldPayload, absl::Cord(field));
  return st;
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(bool has_tokens, const v1::TokenIds& tokens,
                                                  const std::string& text,
                                                  const ModelConfig& config,
                                                  const Tokenizer& tokenizer) {
  std::vector<int32_t> out;
  if (has_tokens) {
    out.assign(tokens.ids().begin(), tokens.ids().end());
  } else {
    if (text.empty()) return FieldError("prompt", "the prompt is empty");
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text);
    if (!ids.ok()) return FieldError("prompt", ids.status().message());
    out.push_back(kBosId);  // prompts start with BOS, as the reference's do
    out.insert(out.end(), ids->begin(), ids->end());
  }
  if (out.empty()) return FieldError("prompt", "the prompt is empty");
  for (int32_t id : out) {
    if (id < 0 || id >= config.vocab_size) {
      return FieldError("prompt", absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                               config.vocab_size, ")"));
    }
  }
  return out;
}

// The sampling field a SamplingParams::Validate message is about (each starts with its name).
std::string SamplingField(absl::string_view message) {
  static constexpr const char* kFields[] = {"temperature",
                                            "top_k",
                                            "top_p",
                                            "logprobs",
                                            "logit_bias",
                                            "repetition_penalty",
                                            "frequency_penalty",
                                            "presence_penalty",
                                            "min_tokens",
                                            "min_p"};
  const absl::string_view name = message.substr(0, message.find_first_of(" :"));
  for (const char* field : kFields) {
    if (name == field) return absl::StrCat("sampling.", field);
  }
  if (absl::StartsWith(message, "stop token id")) return "sampling.stop_token_ids";
  if (name == "response_format" || name == "json_schema" || name == "regex") {
    return "sampling.response_format";
  }
  return "";
}

// INVALID_ARGUMENT (naming `field`, if any) for `what` of `tokens` beyond max_seq_len.
absl::Status CheckFitsContext(size_t tokens, const ModelConfig& config, absl::string_view what,
                              absl::string_view field) {
  if (config.max_seq_len <= 0 || tokens <= static_cast<size_t>(config.max_seq_len)) {
    return absl::OkStatus();
  }
  return FieldError(field,
                    absl::StrCat(what, " (", tokens, " tokens) exceeds the model's max_seq_len ",
                                 config.max_seq_len));
}

}  // namespace

std::string InvalidField(const absl::Status& status) {
  const auto field = status.GetPayload(kFieldPayload);
  return field.has_value() ? std::string(*field) : std::string();
}

absl::StatusOr<CheckedGenerateRequest> CheckGenerateRequest(const v1::GenerateRequest& request,
                                                            const ModelConfig& config,
                                                            const Tokenizer& tokenizer,
                                                            uint32_t default_max_new_tokens) {
  CheckedGenerateRequest call;
  absl::StatusOr<std::vector<int32_t>> prompt =
      PromptTokens(request.has_tokens(), request.tokens(), request.text(), config, tokenizer);
  if (!prompt.ok()) return prompt.status();
  call.prompt = std::move(*prompt);
  const v1::SamplingParams& sampling = request.sampling();
  if (sampling.has_logprobs() && sampling.logprobs() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return FieldError("sampling.logprobs", absl::StrCat("logprobs must be in [0, ", kMaxTopLogprobs,
                                                        "], got ", sampling.logprobs()));
  }
  call.sampling = FromProto(sampling);
  if (absl::Status st = call.sampling.Validate(config.vocab_size); !st.ok()) {
    return FieldError(SamplingField(st.message()), st.message());
  }
  if (!call.sampling.json_schema.empty()) {  // refused here, before any worker compiles it
    if (absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(call.sampling.json_schema);
        !schema.ok()) {
      return FieldError("sampling.response_format",
                        absl::StrCat("json_schema: ", schema.status().message()));
    }
  }
  if (!call.sampling.regex.empty()) {
    if (absl::StatusOr<CharDfa> dfa = CompileRegex(call.sampling.regex); !dfa.ok()) {
      return FieldError("sampling.response_format",
                        absl::StrCat("regex: ", dfa.status().message()));
    }
  }
  if (sampling.n() > static_cast<uint32_t>(kMaxChoices)) {
    return FieldError("sampling.n",
                      absl::StrCat("n must be in [1, ", kMaxChoices, "], got ", sampling.n()));
  }
  call.choices = std::max<uint32_t>(1, sampling.n());
  call.max_new_tokens =
      sampling.max_new_tokens() > 0 ? sampling.max_new_tokens() : default_max_new_tokens;
  if (call.max_new_tokens > kMaxNewTokensLimit) {
    return FieldError("sampling.max_new_tokens",
                      absl::StrCat("max_new_tokens ", call.max_new_tokens, " is absurd (at most ",
                                   kMaxNewTokensLimit, ")"));
  }
  if (sampling.stop_strings_size() > kMaxStopStrings) {
    return FieldError("sampling.stop_strings",
                      absl::StrCat("at most ", kMaxStopStrings, " stop strings"));
  }
  for (const std::string& stop : sampling.stop_strings()) {
    if (stop.empty() || stop.size() > kMaxStopStringBytes) {
      return FieldError("sampling.stop_strings", absl::StrCat("stop strings must have 1 to ",
                                                              kMaxStopStringBytes, " bytes"));
    }
  }
  call.stop_strings.assign(sampling.stop_strings().begin(), sampling.stop_strings().end());
  if (config.max_seq_len > 0 &&
      call.prompt.size() + call.max_new_tokens > static_cast<size_t>(config.max_seq_len)) {
    return FieldError("sampling.max_new_tokens",
                      absl::StrCat("the prompt (", call.prompt.size(),
                                   " tokens) + max_new_tokens (", call.max_new_tokens,
                                   ") exceeds the model's max_seq_len ", config.max_seq_len));
  }
  // A structured answer ends with its value (the constraint then allows only EOS).
  call.stop_at_eos = sampling.stop_at_eos() || call.sampling.Constrained();
  if (request.has_priority()) {
    if (request.priority() < -kMaxSchedulingPriority ||
        request.priority() > kMaxSchedulingPriority) {
      return FieldError("priority",
                        absl::StrCat("priority must be in [", -kMaxSchedulingPriority, ", ",
                                     kMaxSchedulingPriority, "] (lower goes first)"));
    }
    call.priority = request.priority();
  }
  return call;
}

absl::StatusOr<std::vector<int32_t>> CheckScoreRequest(const v1::ScoreRequest& request,
                                                       const ModelConfig& config,
                                                       const Tokenizer& tokenizer) {
  absl::StatusOr<std::vector<int32_t>> prompt =
      PromptTokens(request.has_tokens(), request.tokens(), request.text(), config, tokenizer);
  if (!prompt.ok()) return prompt.status();
  RETURN_IF_ERROR(CheckFitsContext(prompt->size(), config, "the prompt", "prompt"));
  if (request.top_logprobs() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return FieldError("top_logprobs", absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs,
                                                   "], got ", request.top_logprobs()));
  }
  return prompt;
}

absl::StatusOr<std::vector<int32_t>> CheckPrecacheRequest(const v1::PrecacheRequest& request,
                                                          const ModelConfig& config,
                                                          const Tokenizer& tokenizer) {
  absl::StatusOr<std::vector<int32_t>> document =
      PromptTokens(request.has_tokens(), request.tokens(), request.text(), config, tokenizer);
  if (!document.ok()) return document.status();
  RETURN_IF_ERROR(CheckFitsContext(document->size(), config, "the document", ""));
  return document;
}

absl::Status CheckRequestId(const std::string& request_id) {
  if (request_id.size() > kMaxRequestIdBytes) {
    return FieldError("request_id", absl::StrCat("the request id has ", request_id.size(),
                                                 " bytes: at most ", kMaxRequestIdBytes));
  }
  for (const char c : request_id) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return FieldError("request_id",
                        "the request id may hold only printable ASCII characters (X-Request-Id)");
    }
  }
  return absl::OkStatus();
}

std::string NewRequestId() {
  absl::BitGen gen;
  return absl::StrFormat("req-%016x", absl::Uniform<uint64_t>(gen));
}

absl::Status CheckFitsDecodeWorker(uint64_t input, uint64_t still_to_come, uint64_t longest_rows) {
  const uint64_t rows = input + still_to_come - 1;
  if (longest_rows == 0 || rows <= longest_rows) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the request needs ", rows, " K/V rows on a decode worker (", input,
      " prompt tokens + max_new_tokens ", still_to_come,
      " - 1); the largest decode worker's state budget (--memory-budget-mb) holds ", longest_rows,
      ": shorten the prompt or max_new_tokens, or give decode workers more memory"));
}

}  // namespace yoco
