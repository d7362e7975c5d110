// ChatTemplate: the declaration file's refusals and ChatML rendering, token for token.
#include "lib/openai/chat_template.h"

#include <gtest/gtest.h>

#include "lib/text/byte_tokenizer.h"

namespace yoco {
namespace {

ModelConfig Config() {
  ModelConfig config;
  config.vocab_size = 512;
  return config;
}

// The ids of `text` under the byte tokenizer, written out independently of it.
std::vector<int32_t> Bytes(const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(c + 4);
  return ids;
}

TEST(ChatTemplateTest, RendersChatMlWithTheDeclaredSpecials) {
  auto chat = ChatTemplate::FromJson(
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 300, "<|im_end|>": 301}})",
      Config());
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->end_of_message(), 301);
  ByteTokenizer tokenizer;
  auto ids = chat->Render({{"system", "Be brief."}, {"user", "Hi"}}, tokenizer);
  ASSERT_TRUE(ids.ok()) << ids.status();
  std::vector<int32_t> want = {0, 300};
  for (auto part : {Bytes("system\nBe brief."), std::vector<int32_t>{301}, Bytes("\n"),
                    std::vector<int32_t>{300}, Bytes("user\nHi"), std::vector<int32_t>{301},
                    Bytes("\n"), std::vector<int32_t>{300}, Bytes("assistant\n")}) {
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(*ids, want);
}

TEST(ChatTemplateTest, RefusesWhatIsNotATemplateOfThisModel) {
  const char* bad[] = {
      "[]",
      R"({"format": "llama3", "special_tokens": {"<|im_start|>": 300, "<|im_end|>": 301}})",
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 300}})",
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 300, "<|im_end|>": 512}})",
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 2, "<|im_end|>": 301}})",
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 300, "<|im_end|>": 300}})",
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": "300", "<|im_end|>": 301}})",
      R"({"format": "chatml", "template": "{{x}}", "special_tokens": {}})",
  };
  for (const char* text : bad) {
    auto chat = ChatTemplate::FromJson(text, Config());
    EXPECT_EQ(chat.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ChatTemplateTest, AModelWithoutTheFileHasNoTemplate) {
  auto chat = ChatTemplate::Load(::testing::TempDir() + "/no-such-model", Config());
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_FALSE(chat->has_value());
}

}  // namespace
}  // namespace yoco
