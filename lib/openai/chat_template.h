// ChatTemplate: how chat messages become a prompt, as the model directory declares it in
// chat_template.json. Only ChatML is known (each message "<|im_start|>ROLE\nCONTENT<|im_end|>\n",
// then "<|im_start|>assistant\n"); the two specials' token ids come from the file, since they
// belong to the model's vocabulary, not to this code.
#ifndef YOCO_LIB_OPENAI_CHAT_TEMPLATE_H_
#define YOCO_LIB_OPENAI_CHAT_TEMPLATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/model_config.h"
#include "lib/text/tokenizer.h"

namespace yoco {

struct ChatMessage {
  std::string role;  // system, user, assistant, ...
  std::string content;
};

class ChatTemplate {
 public:
  // The template of `model_dir`/chat_template.json: {"format": "chatml", "special_tokens":
  // {"<|im_start|>": ID, "<|im_end|>": ID}}. nullopt when the model declares none;
  // INVALID_ARGUMENT naming the problem for a file that is not such a template or whose ids
  // fall outside the model's vocabulary.
  static absl::StatusOr<std::optional<ChatTemplate>> Load(const std::string& model_dir,
                                                          const ModelConfig& config);
  static absl::StatusOr<ChatTemplate> FromJson(const std::string& text, const ModelConfig& config);

  // BOS, the messages, then the assistant's turn opened. INVALID_ARGUMENT for text the
  // tokenizer refuses.
  absl::StatusOr<std::vector<int32_t>> Render(const std::vector<ChatMessage>& messages,
                                              const Tokenizer& tokenizer) const;

  // Generation ends at this token (the end of the assistant's message).
  int32_t end_of_message() const { return im_end_; }

 private:
  ChatTemplate(int32_t im_start, int32_t im_end) : im_start_(im_start), im_end_(im_end) {}
  int32_t im_start_;
  int32_t im_end_;
};

}  // namespace yoco

#endif  // YOCO_LIB_OPENAI_CHAT_TEMPLATE_H_
