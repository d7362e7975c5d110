// OpenAI request bodies -> GenerateRequest. Strict: an unknown field or a setting we do not
// implement is refused by name rather than silently ignored, so a client never gets output
// that ignores what it asked for.
#include "lib/openai/openai_request.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/model/sampling_params.h"
#include "lib/model/strict_json.h"
#include "lib/scheduling/scheduling_class.h"

namespace yoco {
namespace {

constexpr char kParamPayload[] = "yoco.openai/param";
constexpr size_t kMaxMessages = 4096;

using json = nlohmann::json;

bool Present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// The fields ParseCommon reads, which both endpoints take.
const std::set<std::string>& CommonFields() {
  static const auto* fields = new std::set<std::string>{"model",
                                                        "temperature",
                                                        "top_p",
                                                        "top_k",
                                                        "seed",
                                                        "stop",
                                                        "stream",
                                                        "stream_options",
                                                        "n",
                                                        "presence_penalty",
                                                        "frequency_penalty",
                                                        "repetition_penalty",
                                                        "min_p",
                                                        "min_tokens",
                                                        "logit_bias",
                                                        "user",
                                                        "ignore_eos",
                                                        "cache_salt",
                                                        "priority",
                                                        "response_format"};
  return *fields;
}

// An unknown field is refused by name: those of `endpoint` and CommonFields() are known.
absl::Status CheckKnownFields(const json& body, const std::set<std::string>& endpoint) {
  for (const auto& [key, value] : body.items()) {
    if (endpoint.count(key) == 0 && CommonFields().count(key) == 0) {
      return ParamError(key, "unknown or unsupported field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Bool(const json& body, const char* key, bool otherwise) {
  if (!Present(body, key)) return otherwise;
  if (!body[key].is_boolean()) return ParamError(key, "must be true or false");
  return body[key].get<bool>();
}

// An integer in [lo, hi]; JSON numbers like 3.0 are not integers here.
absl::StatusOr<std::optional<int64_t>> Integer(const json& body, const char* key, int64_t lo,
                                               int64_t hi) {
  if (!Present(body, key)) return std::optional<int64_t>();
  const json& v = body[key];
  if (!v.is_number_integer()) return ParamError(key, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return ParamError(key, absl::StrCat("must be at most ", hi));
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return ParamError(key, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  return std::optional<int64_t>(x);
}

absl::StatusOr<std::optional<double>> Number(const json& body, const char* key, double lo,
                                             double hi) {
  if (!Present(body, key)) return std::optional<double>();
  const json& v = body[key];
  if (!v.is_number()) return ParamError(key, "must be a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    return ParamError(key, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  return std::optional<double>(x);
}

// OpenAI's response_format: {"type": "text"}, {"type": "json_object"}, or {"type":
// "json_schema", "json_schema": {"name", "schema", "strict", "description"}}. The schema goes to
// the router as text, which compiles it (and names what it does not support).
absl::Status ParseResponseFormat(const json& body, v1::SamplingParams& s) {
  if (!Present(body, "response_format")) return absl::OkStatus();
  const json& format = body["response_format"];
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return ParamError("response_format", "must be an object with a \"type\"");
  }
  const std::string type = format["type"].get<std::string>();
  for (const auto& [key, value] : format.items()) {
    if (key != "type" && !(type == "json_schema" && key == "json_schema")) {
      return ParamError(absl::StrCat("response_format.", key), "unknown or unsupported field");
    }
  }
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    s.mutable_response_format()->set_json_object(true);
    return absl::OkStatus();
  }
  if (type != "json_schema") {
    return ParamError("response_format.type", "must be text, json_object or json_schema");
  }
  if (!format.contains("json_schema") || !format["json_schema"].is_object()) {
    return ParamError("response_format.json_schema", "is required (an object with a schema)");
  }
  const json& spec = format["json_schema"];
  for (const auto& [key, value] : spec.items()) {
    if (key != "name" && key != "schema" && key != "strict" && key != "description") {
      return ParamError(absl::StrCat("response_format.json_schema.", key),
                        "unknown or unsupported field");
    }
  }
  // strict or not, the answer follows the schema: constrained decoding has no looser mode.
  if (!spec.contains("schema") || !spec["schema"].is_object()) {
    return ParamError("response_format.json_schema.schema", "is required (a JSON Schema object)");
  }
  s.mutable_response_format()->set_json_schema(spec["schema"].dump());
  return absl::OkStatus();
}

// Fields both endpoints share: sampling, stops, streaming, cache salt, the settings we refuse.
absl::Status ParseCommon(const json& body, OpenAiGenerate& out, uint64_t seed_if_absent) {
  if (Present(body, "model")) {
    if (!body["model"].is_string()) return ParamError("model", "must be a string");
    out.model = body["model"].get<std::string>();
  }
  v1::SamplingParams& s = *out.request.mutable_sampling();
  auto temperature = Number(body, "temperature", 0, 2);
  if (!temperature.ok()) return temperature.status();
  s.set_temperature(temperature->value_or(1.0));
  auto top_p = Number(body, "top_p", 0, 1);
  if (!top_p.ok()) return top_p.status();
  if (top_p->has_value() && **top_p == 0) return ParamError("top_p", "must be above 0");
  s.set_top_p(top_p->value_or(1.0));
  auto top_k = Integer(body, "top_k", -1, 1 << 30);  // -1 and 0: off, as vLLM has it
  if (!top_k.ok()) return top_k.status();
  s.set_top_k(static_cast<int32_t>(std::max<int64_t>(0, top_k->value_or(0))));
  auto seed = Integer(body, "seed", 0, INT64_MAX);
  if (!seed.ok()) return seed.status();
  s.set_seed(seed->has_value() ? static_cast<uint64_t>(**seed) : seed_if_absent);
  auto n = Integer(body, "n", 1, kMaxChoices);
  if (!n.ok()) return n.status();
  out.choices = static_cast<uint32_t>(n->value_or(1));
  s.set_n(out.choices);
  auto presence = Number(body, "presence_penalty", -2, 2);
  if (!presence.ok()) return presence.status();
  s.set_presence_penalty(static_cast<float>(presence->value_or(0)));
  auto frequency = Number(body, "frequency_penalty", -2, 2);
  if (!frequency.ok()) return frequency.status();
  s.set_frequency_penalty(static_cast<float>(frequency->value_or(0)));
  // vLLM's extensions, with its meanings.
  auto repetition = Number(body, "repetition_penalty", 0, 10);
  if (!repetition.ok()) return repetition.status();
  if (repetition->has_value() && **repetition == 0) {
    return ParamError("repetition_penalty", "must be above 0 (1: off)");
  }
  s.set_repetition_penalty(static_cast<float>(repetition->value_or(1)));
  auto min_p = Number(body, "min_p", 0, 1);
  if (!min_p.ok()) return min_p.status();
  s.set_min_p(static_cast<float>(min_p->value_or(0)));
  auto min_tokens = Integer(body, "min_tokens", 0, 1 << 20);
  if (!min_tokens.ok()) return min_tokens.status();
  s.set_min_tokens(static_cast<uint32_t>(min_tokens->value_or(0)));
  if (Present(body, "logit_bias")) {
    const json& bias = body["logit_bias"];
    if (!bias.is_object()) return ParamError("logit_bias", "must be an object of token id: bias");
    for (const auto& [key, value] : bias.items()) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(key, &id) || id < 0 || absl::StrCat(id) != key) {
        return ParamError("logit_bias", absl::StrCat("\"", key, "\" is not a token id"));
      }
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
        return ParamError("logit_bias", "biases must be numbers in [-100, 100]");
      }
      (*s.mutable_logit_bias())[id] = static_cast<float>(value.get<double>());
    }
  }
  if (Present(body, "user") && !body["user"].is_string()) {
    return ParamError("user", "must be a string");
  }
  // vLLM's extension: lower goes first when workers are busy; absent, the tenant's default.
  auto priority = Integer(body, "priority", -kMaxSchedulingPriority, kMaxSchedulingPriority);
  if (!priority.ok()) return priority.status();
  if (priority->has_value()) out.request.set_priority(static_cast<int32_t>(**priority));
  auto ignore_eos = Bool(body, "ignore_eos", false);
  if (!ignore_eos.ok()) return ignore_eos.status();
  s.set_stop_at_eos(!*ignore_eos);
  if (Present(body, "stop")) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      s.add_stop_strings(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& one : stop) {
        if (!one.is_string()) return ParamError("stop", "must be a string or an array of strings");
        s.add_stop_strings(one.get<std::string>());
      }
    } else {
      return ParamError("stop", "must be a string or an array of strings");
    }
    for (const std::string& one : s.stop_strings()) {
      if (one.empty()) return ParamError("stop", "a stop string is empty");
    }
  }
  auto stream = Bool(body, "stream", false);
  if (!stream.ok()) return stream.status();
  out.stream = *stream;
  if (Present(body, "stream_options")) {
    const json& options = body["stream_options"];
    if (!out.stream) return ParamError("stream_options", "is only allowed with \"stream\": true");
    if (!options.is_object()) return ParamError("stream_options", "must be an object");
    for (const auto& [key, value] : options.items()) {
      if (key != "include_usage") {
        return ParamError(absl::StrCat("stream_options.", key), "unknown or unsupported field");
      }
    }
    auto usage = Bool(options, "include_usage", false);
    if (!usage.ok()) return ParamError("stream_options.include_usage", "must be true or false");
    out.include_usage = *usage;
  }
  if (absl::Status st = ParseResponseFormat(body, s); !st.ok()) return st;
  if (Present(body, "cache_salt")) {
    if (!body["cache_salt"].is_string() || body["cache_salt"].get<std::string>().empty()) {
      return ParamError("cache_salt", "must be a non-empty string");
    }
    out.request.set_cache_salt(body["cache_salt"].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status SetMaxTokens(const json& body, const char* key, uint32_t fallback,
                          OpenAiGenerate& out) {
  auto max_tokens = Integer(body, key, 1, 1 << 20);
  if (!max_tokens.ok()) return max_tokens.status();
  out.request.mutable_sampling()->set_max_new_tokens(
      max_tokens->has_value() ? static_cast<uint32_t>(**max_tokens) : fallback);
  return absl::OkStatus();
}

absl::StatusOr<std::string> MessageContent(const json& content, size_t i) {
  const std::string param = absl::StrCat("messages[", i, "].content");
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) return ParamError(param, "must be a string or an array of text parts");
  std::string text;
  for (size_t p = 0; p < content.size(); ++p) {
    const json& part = content[p];
    const std::string part_param = absl::StrCat(param, "[", p, "]");
    if (!part.is_object()) return ParamError(part_param, "must be an object");
    for (const auto& [key, value] : part.items()) {
      if (key != "type" && key != "text") {
        return ParamError(absl::StrCat(part_param, ".", key), "unknown or unsupported field");
      }
    }
    if (!part.contains("type") || part["type"] != "text") {
      return ParamError(absl::StrCat(part_param, ".type"), "only \"text\" parts are supported");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return ParamError(absl::StrCat(part_param, ".text"), "must be a string");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

absl::Status ParamError(absl::string_view param, absl::string_view problem) {
  absl::Status st = absl::InvalidArgumentError(absl::StrCat(param, ": ", problem));
  st.SetPayload(kParamPayload, absl::Cord(param));
  return st;
}

std::string RequestParam(const absl::Status& status) {
  auto param = status.GetPayload(kParamPayload);
  return param.has_value() ? std::string(*param) : std::string();
}

absl::Status AppendTokenIds(const json& ids, absl::string_view param, v1::TokenIds* out) {
  if (!ids.is_array()) return ParamError(param, "must be an array of token ids");
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return ParamError(param, "token ids must be non-negative integers");
    }
    out->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseRequestObject(absl::string_view body) {
  JsonLimits limits;
  limits.max_depth = 8;
  limits.max_values = size_t{1} << 22;
  absl::StatusOr<json> parsed = ParseStrictJson(body, limits);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body is not valid JSON: ", parsed.status().message()));
  }
  if (!parsed->is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  return parsed;
}

absl::StatusOr<OpenAiGenerate> ParseCompletionRequest(absl::string_view text,
                                                      const OpenAiDefaults& defaults,
                                                      uint64_t seed_if_absent) {
  absl::StatusOr<json> parsed = ParseRequestObject(text);
  if (!parsed.ok()) return parsed.status();
  const json& body = *parsed;
  if (absl::Status st =
          CheckKnownFields(body, {"prompt", "max_tokens", "best_of", "echo", "logprobs", "suffix"});
      !st.ok()) {
    return st;
  }
  OpenAiGenerate out;
  if (absl::Status st = ParseCommon(body, out, seed_if_absent); !st.ok()) return st;
  auto echo = Bool(body, "echo", false);
  if (!echo.ok()) return echo.status();
  out.echo = *echo;
  if (out.echo) {
    // Scoring the prompt (lm-evaluation-harness sends echo, logprobs and max_tokens 0).
    auto max_tokens = Integer(body, "max_tokens", 0, 1 << 20);
    if (!max_tokens.ok()) return max_tokens.status();
    if (max_tokens->value_or(0) != 0) {
      return ParamError("echo", "only with max_tokens 0 (the prompt scored, nothing generated)");
    }
    if (out.stream) return ParamError("echo", "is not supported with stream");
    if (out.choices > 1) return ParamError("n", "must be 1 with echo (the prompt is scored once)");
  } else if (absl::Status st =
                 SetMaxTokens(body, "max_tokens", defaults.completion_max_tokens, out);
             !st.ok()) {
    return st;
  }
  // The chosen token's logprob and this many alternatives' (the legacy shape's top_logprobs).
  auto logprobs = Integer(body, "logprobs", 0, kMaxTopLogprobs);
  if (!logprobs.ok()) return logprobs.status();
  if (logprobs->has_value()) {
    out.request.mutable_sampling()->set_logprobs(static_cast<uint32_t>(**logprobs));
  }
  // best_of candidates generated, the n of the highest sum of logprobs returned (OpenAI's).
  auto best_of = Integer(body, "best_of", 1, kMaxChoices);
  if (!best_of.ok()) return best_of.status();
  out.best_of = static_cast<uint32_t>(best_of->value_or(out.choices));
  if (out.best_of < out.choices) return ParamError("best_of", "must be at least n");
  if (out.best_of > out.choices) {
    if (out.stream) return ParamError("best_of", "is not supported with stream");
    if (out.echo) return ParamError("best_of", "is not supported with echo");
    out.request.mutable_sampling()->set_n(out.best_of);
    // Ranking needs each token's logprob; they are shown only when asked for.
    out.logprobs_shown = logprobs->has_value();
    if (!out.logprobs_shown) out.request.mutable_sampling()->set_logprobs(0);
  }
  if (Present(body, "suffix")) return ParamError("suffix", "is not supported");
  if (!Present(body, "prompt")) return ParamError("prompt", "is required");
  const json& prompt = body["prompt"];
  auto set_tokens = [&](const json& ids) -> absl::Status {
    if (ids.empty()) return ParamError("prompt", "is empty");
    return AppendTokenIds(ids, "prompt", out.request.mutable_tokens());
  };
  if (prompt.is_string()) {
    if (prompt.get<std::string>().empty()) return ParamError("prompt", "is empty");
    out.request.set_text(prompt.get<std::string>());
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) {
    if (absl::Status st = set_tokens(prompt); !st.ok()) return st;
  } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    if (prompt[0].get<std::string>().empty()) return ParamError("prompt", "is empty");
    out.request.set_text(prompt[0].get<std::string>());
  } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_array()) {
    if (absl::Status st = set_tokens(prompt[0]); !st.ok()) return st;
  } else if (prompt.is_array() && prompt.size() > 1 &&
             (prompt[0].is_string() || prompt[0].is_array())) {
    return ParamError("prompt", "one prompt per request (batches are not supported)");
  } else {
    return ParamError("prompt", "must be a string or an array of token ids");
  }
  return out;
}

absl::StatusOr<OpenAiGenerate> ParseChatRequest(absl::string_view text,
                                                const ChatTemplate* chat_template,
                                                const Tokenizer& tokenizer,
                                                const OpenAiDefaults& defaults,
                                                uint64_t seed_if_absent) {
  absl::StatusOr<json> parsed = ParseRequestObject(text);
  if (!parsed.ok()) return parsed.status();
  const json& body = *parsed;
  if (absl::Status st = CheckKnownFields(
          body, {"messages", "max_tokens", "max_completion_tokens", "logprobs", "top_logprobs"});
      !st.ok()) {
    return st;
  }
  OpenAiGenerate out;
  out.chat = true;
  if (absl::Status st = ParseCommon(body, out, seed_if_absent); !st.ok()) return st;
  auto logprobs = Bool(body, "logprobs", false);
  if (!logprobs.ok()) return logprobs.status();
  auto top = Integer(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (!top.ok()) return top.status();
  if (top->has_value() && !*logprobs) {
    return ParamError("top_logprobs", "needs \"logprobs\": true");
  }
  if (*logprobs)
    out.request.mutable_sampling()->set_logprobs(static_cast<uint32_t>(top->value_or(0)));
  if (chat_template == nullptr) {
    return ParamError("messages",
                      "this model declares no chat template (chat_template.json in its folder); "
                      "use /v1/completions");
  }
  if (!Present(body, "messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return ParamError("messages", "must be a non-empty array");
  }
  const json& messages = body["messages"];
  if (messages.size() > kMaxMessages) {
    return ParamError("messages", absl::StrCat("at most ", kMaxMessages, " messages"));
  }
  std::vector<ChatMessage> rendered;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return ParamError(param, "must be an object");
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content" && key != "name") {
        return ParamError(absl::StrCat(param, ".", key), "unknown or unsupported field");
      }
    }
    if (!m.contains("role") || !m["role"].is_string()) {
      return ParamError(absl::StrCat(param, ".role"), "must be a string");
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant") {
      return ParamError(absl::StrCat(param, ".role"),
                        "must be system, developer, user or assistant");
    }
    if (m.contains("name") && !m["name"].is_string()) {
      return ParamError(absl::StrCat(param, ".name"), "must be a string");
    }
    if (!m.contains("content")) return ParamError(absl::StrCat(param, ".content"), "is required");
    absl::StatusOr<std::string> content = MessageContent(m["content"], i);
    if (!content.ok()) return content.status();
    rendered.push_back({role == "developer" ? "system" : role, *std::move(content)});
  }
  absl::StatusOr<std::vector<int32_t>> prompt = chat_template->Render(rendered, tokenizer);
  if (!prompt.ok()) return ParamError("messages", prompt.status().message());
  out.request.mutable_tokens()->mutable_ids()->Add(prompt->begin(), prompt->end());
  // Without a limit the answer runs to the end of its message or of the model's context.
  uint32_t fallback = defaults.chat_max_tokens;
  if (defaults.max_seq_len > 0 && prompt->size() < static_cast<size_t>(defaults.max_seq_len)) {
    fallback =
        std::min<uint32_t>(fallback, static_cast<uint32_t>(defaults.max_seq_len - prompt->size()));
  }
  if (Present(body, "max_tokens") && Present(body, "max_completion_tokens")) {
    return ParamError("max_completion_tokens",
                      "give max_tokens or max_completion_tokens, not both");
  }
  const char* key = Present(body, "max_tokens") ? "max_tokens" : "max_completion_tokens";
  if (absl::Status st = SetMaxTokens(body, key, fallback, out); !st.ok()) return st;
  out.request.mutable_sampling()->add_stop_token_ids(chat_template->end_of_message());
  out.hidden_token_ids.push_back(chat_template->end_of_message());
  return out;
}

}  // namespace yoco
