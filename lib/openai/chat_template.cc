// ChatML rendering from the model directory's declaration.
#include "lib/openai/chat_template.h"

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"
#include "lib/model/sampling_params.h"
#include "lib/model/strict_json.h"

namespace yoco {
namespace {

constexpr char kStart[] = "<|im_start|>";
constexpr char kEnd[] = "<|im_end|>";
constexpr size_t kMaxTemplateBytes = 64 << 10;

}  // namespace

absl::StatusOr<std::optional<ChatTemplate>> ChatTemplate::Load(const std::string& model_dir,
                                                               const ModelConfig& config) {
  const std::string path = model_dir + "/chat_template.json";
  absl::StatusOr<std::string> text = ReadBoundedFile(path, kMaxTemplateBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return std::optional<ChatTemplate>();
    return text.status();
  }
  absl::StatusOr<ChatTemplate> parsed = FromJson(*text, config);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.status().message()));
  }
  return std::optional<ChatTemplate>(*parsed);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromJson(const std::string& text,
                                                    const ModelConfig& config) {
  absl::StatusOr<nlohmann::json> json = ParseStrictJson(text, JsonLimits{});
  if (!json.ok()) return json.status();
  if (!json->is_object()) return absl::InvalidArgumentError("not a JSON object");
  for (const auto& [key, value] : json->items()) {
    if (key != "format" && key != "special_tokens") {
      return absl::InvalidArgumentError(absl::StrCat("unknown field \"", key, "\""));
    }
  }
  if (!json->contains("format") || (*json)["format"] != "chatml") {
    return absl::InvalidArgumentError("\"format\" must be \"chatml\" (the only one known)");
  }
  const nlohmann::json& specials = json->value("special_tokens", nlohmann::json::object());
  if (!specials.is_object() || specials.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"special_tokens\" must map exactly ", kStart, " and ", kEnd, " to ids"));
  }
  int32_t ids[2];
  const char* names[2] = {kStart, kEnd};
  for (int i = 0; i < 2; ++i) {
    if (!specials.contains(names[i]) || !specials[names[i]].is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"special_tokens\" must give ", names[i], " an integer id"));
    }
    const int64_t id = specials[names[i]].get<int64_t>();
    if (id < 4 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          names[i], ": id ", id, " is not a token of the vocabulary [4, ", config.vocab_size, ")"));
    }
    ids[i] = static_cast<int32_t>(id);
  }
  if (ids[0] == ids[1]) return absl::InvalidArgumentError("the two specials share one id");
  return ChatTemplate(ids[0], ids[1]);
}

absl::StatusOr<std::vector<int32_t>> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                          const Tokenizer& tokenizer) const {
  std::vector<int32_t> out = {kBosId};
  auto append = [&](const std::string& text) -> absl::Status {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text);
    if (!ids.ok()) return ids.status();
    out.insert(out.end(), ids->begin(), ids->end());
    return absl::OkStatus();
  };
  for (const ChatMessage& m : messages) {
    out.push_back(im_start_);
    if (absl::Status st = append(absl::StrCat(m.role, "\n", m.content)); !st.ok()) return st;
    out.push_back(im_end_);
    if (absl::Status st = append("\n"); !st.ok()) return st;
  }
  out.push_back(im_start_);
  if (absl::Status st = append("assistant\n"); !st.ok()) return st;
  return out;
}

}  // namespace yoco
