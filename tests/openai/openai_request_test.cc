// Request bodies -> GenerateRequest: every field's mapping, and every refusal naming its field.
#include "lib/openai/openai_request.h"

#include <gtest/gtest.h>

#include "lib/text/byte_tokenizer.h"

namespace yoco {
namespace {

ChatTemplate Chat() {
  ModelConfig config;
  config.vocab_size = 512;
  auto chat = ChatTemplate::FromJson(
      R"({"format": "chatml", "special_tokens": {"<|im_start|>": 260, "<|im_end|>": 261}})",
      config);
  EXPECT_TRUE(chat.ok()) << chat.status();
  return *chat;
}

TEST(OpenAiRequestTest, CompletionFieldsMapToTheGenerateRequest) {
  auto r = ParseCompletionRequest(
      R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "top_k": 40, "seed": 42, "stop": ["A", "BB"], "stream": true,
          "stream_options": {"include_usage": true}, "n": 1, "cache_salt": "s",
          "user": "u", "presence_penalty": 0, "logprobs": null, "priority": -3})",
      OpenAiDefaults{}, 99);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->chat);
  ASSERT_TRUE(r->request.has_priority());
  EXPECT_EQ(r->request.priority(), -3);
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->request.text(), "Hello");
  const v1::SamplingParams& s = r->request.sampling();
  EXPECT_EQ(s.max_new_tokens(), 7u);
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.top_k(), 40);
  EXPECT_EQ(s.seed(), 42u);
  ASSERT_EQ(s.stop_strings_size(), 2);
  EXPECT_EQ(s.stop_strings(1), "BB");
  EXPECT_TRUE(s.stop_at_eos());
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->request.cache_salt(), "s");
}

TEST(OpenAiRequestTest, LogprobsAskForTheChosenTokenAndTheTopOnes) {
  auto none = ParseCompletionRequest(R"({"prompt": "x"})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->request.sampling().has_logprobs());
  auto legacy = ParseCompletionRequest(R"({"prompt": "x", "logprobs": 0})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  ASSERT_TRUE(legacy->request.sampling().has_logprobs());
  EXPECT_EQ(legacy->request.sampling().logprobs(), 0u);
  legacy = ParseCompletionRequest(R"({"prompt": "x", "logprobs": 20})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->request.sampling().logprobs(), 20u);

  const ByteTokenizer tokenizer;
  const ChatTemplate chat = Chat();
  auto parse_chat = [&](const std::string& extra) {
    return ParseChatRequest(R"({"messages": [{"role": "user", "content": "x"}])" + extra + "}",
                            &chat, tokenizer, OpenAiDefaults{}, 1);
  };
  auto plain = parse_chat("");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->request.sampling().has_logprobs());
  auto off = parse_chat(R"(, "logprobs": false)");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->request.sampling().has_logprobs());
  auto chosen = parse_chat(R"(, "logprobs": true)");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_TRUE(chosen->request.sampling().has_logprobs());
  EXPECT_EQ(chosen->request.sampling().logprobs(), 0u);
  auto top = parse_chat(R"(, "logprobs": true, "top_logprobs": 7)");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->request.sampling().logprobs(), 7u);
}

TEST(OpenAiRequestTest, EchoWithMaxTokensZeroScoresThePrompt) {
  auto r = ParseCompletionRequest(R"({"prompt": [0, 7, 9], "echo": true, "max_tokens": 0,
                                      "logprobs": 1, "temperature": 0})",
                                  OpenAiDefaults{}, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(r->request.sampling().logprobs(), 1u);
  EXPECT_EQ(r->request.tokens().ids_size(), 3);
  auto absent = ParseCompletionRequest(R"({"prompt": "x", "echo": true})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_TRUE(absent->echo);
  EXPECT_FALSE(absent->request.sampling().has_logprobs());
  auto plain = ParseCompletionRequest(R"({"prompt": "x", "echo": false})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->echo);
  // max_tokens 0 is only for scoring.
  EXPECT_EQ(RequestParam(
                ParseCompletionRequest(R"({"prompt": "x", "max_tokens": 0})", OpenAiDefaults{}, 1)
                    .status()),
            "max_tokens");
}

TEST(OpenAiRequestTest, PenaltiesMinPMinTokensAndLogitBiasMapToTheSampling) {
  auto r = ParseCompletionRequest(
      R"({"prompt": "x", "presence_penalty": 0.5, "frequency_penalty": -1.25,
          "repetition_penalty": 1.2, "min_p": 0.05, "min_tokens": 4,
          "logit_bias": {"50256": -100, "7": 2.5}})",
      OpenAiDefaults{}, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SamplingParams& s = r->request.sampling();
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -1.25f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.2f);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_EQ(s.min_tokens(), 4u);
  ASSERT_EQ(s.logit_bias().size(), 2u);
  EXPECT_FLOAT_EQ(s.logit_bias().at(50256), -100.0f);
  EXPECT_FLOAT_EQ(s.logit_bias().at(7), 2.5f);
  auto none = ParseCompletionRequest(R"({"prompt": "x"})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_FLOAT_EQ(none->request.sampling().repetition_penalty(), 1.0f);  // off
  EXPECT_TRUE(none->request.sampling().logit_bias().empty());
}

TEST(OpenAiRequestTest, CompletionDefaultsAndPromptForms) {
  auto r =
      ParseCompletionRequest(R"({"prompt": [0, 17, 5], "ignore_eos": true})", OpenAiDefaults{}, 99);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->request.has_priority());  // the tenant's default
  EXPECT_EQ(r->request.tokens().ids_size(), 3);
  EXPECT_EQ(r->request.sampling().max_new_tokens(), 16u);  // OpenAI's default
  EXPECT_FLOAT_EQ(r->request.sampling().temperature(), 1.0f);
  EXPECT_EQ(r->request.sampling().seed(), 99u);
  EXPECT_FALSE(r->request.sampling().stop_at_eos());
  EXPECT_FALSE(r->stream);
  auto one_text = ParseCompletionRequest(R"({"prompt": ["x"]})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(one_text.ok());
  EXPECT_EQ(one_text->request.text(), "x");
  auto one_ids = ParseCompletionRequest(R"({"prompt": [[0, 9]]})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(one_ids.ok());
  EXPECT_EQ(one_ids->request.tokens().ids(1), 9);
}

// n asks the router for n choices; best_of for best_of of them, with the logprobs that rank
// them (shown only when asked for).
TEST(OpenAiRequestTest, ChoicesAndBestOf) {
  auto three = ParseCompletionRequest(R"({"prompt": "x", "n": 3})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->request.sampling().n(), 3u);
  EXPECT_EQ(three->choices, 3u);
  EXPECT_EQ(three->best_of, 3u);
  EXPECT_FALSE(three->request.sampling().has_logprobs());
  auto best =
      ParseCompletionRequest(R"({"prompt": "x", "n": 2, "best_of": 5})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->request.sampling().n(), 5u);
  EXPECT_EQ(best->choices, 2u);
  EXPECT_EQ(best->best_of, 5u);
  EXPECT_EQ(best->request.sampling().logprobs(), 0u);
  EXPECT_FALSE(best->logprobs_shown);
  auto shown = ParseCompletionRequest(R"({"prompt": "x", "best_of": 2, "logprobs": 3})",
                                      OpenAiDefaults{}, 1);
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_EQ(shown->request.sampling().logprobs(), 3u);
  EXPECT_TRUE(shown->logprobs_shown);
}

// response_format: json_object, or a json_schema's schema passed on as text (the router
// compiles it); text is the default.
TEST(OpenAiRequestTest, ResponseFormatAsksForStructuredOutput) {
  auto object = ParseCompletionRequest(
      R"({"prompt": "x", "response_format": {"type": "json_object"}})", OpenAiDefaults{}, 1);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_TRUE(object->request.sampling().response_format().json_object());
  auto schema = ParseCompletionRequest(
      R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema":
          {"name": "r", "strict": true, "schema": {"type": "object", "properties": {}}}}})",
      OpenAiDefaults{}, 1);
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(nlohmann::json::parse(schema->request.sampling().response_format().json_schema()),
            nlohmann::json::parse(R"({"type": "object", "properties": {}})"));
  auto text = ParseCompletionRequest(R"({"prompt": "x", "response_format": {"type": "text"}})",
                                     OpenAiDefaults{}, 1);
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->request.sampling().has_response_format());
}

TEST(OpenAiRequestTest, RefusalsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"prompt": "x", "n": 17})", "n"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 2, "echo": true, "max_tokens": 0})", "n"},
      {R"({"prompt": "x", "n": 3, "best_of": 2})", "best_of"},
      {R"({"prompt": "x", "best_of": 2, "stream": true})", "best_of"},
      {R"({"prompt": "x", "best_of": 17})", "best_of"},
      {R"({"prompt": "x", "response_format": "json"})", "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "xml"}})", "response_format.type"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema"}})",
       "response_format.json_schema"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {}}})",
       "response_format.json_schema.schema"},
      {R"({"prompt": "x", "response_format": {"type": "json_object", "x": 1}})",
       "response_format.x"},
      {R"({"prompt": "x", "echo": true, "max_tokens": 3})", "echo"},
      {R"({"prompt": "x", "echo": true, "stream": true})", "echo"},
      {R"({"prompt": "x", "echo": true, "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {R"({"prompt": "x", "logprobs": -1})", "logprobs"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 3.5})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": "8"})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 18446744073709551615})", "max_tokens"},
      {R"({"prompt": "x", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_k": -2})", "top_k"},
      {R"({"prompt": "x", "seed": -5})", "seed"},
      {R"({"prompt": "x", "stop": 3})", "stop"},
      {R"({"prompt": "x", "stop": ""})", "stop"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"x": 1}})", "stream_options.x"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "frequency_penalty": 2.5})", "frequency_penalty"},
      {R"({"prompt": "x", "presence_penalty": "1"})", "presence_penalty"},
      {R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "x", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "x", "min_tokens": -1})", "min_tokens"},
      {R"({"prompt": "x", "logit_bias": [5]})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"x": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"05": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"-5": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
      {R"({"prompt": "x", "cache_salt": 1})", "cache_salt"},
      {R"({"prompt": "x", "priority": 101})", "priority"},
      {R"({"prompt": "x", "priority": 0.5})", "priority"},
      {R"({"prompt": "x", "model": 1})", "model"},
      {R"({"prompt": "x", "unknown": 1})", "unknown"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": [1, "2"]})", "prompt"},
      {R"({"prompt": {"text": "x"}})", "prompt"},
      {R"({"max_tokens": 3})", "prompt"},
  };
  for (const Case& c : cases) {
    auto r = ParseCompletionRequest(c.body, OpenAiDefaults{}, 1);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(RequestParam(r.status()), c.param) << c.body << ": " << r.status();
    EXPECT_EQ(r.status().message().substr(0, std::string(c.param).size()), c.param);
  }
}

TEST(OpenAiRequestTest, TokenIdArraysAreCheckedAndNamed) {
  v1::TokenIds ids;
  ASSERT_TRUE(AppendTokenIds(nlohmann::json::parse("[0, 5, 2147483647]"), "tokens", &ids).ok());
  EXPECT_EQ(ids.ids_size(), 3);
  for (const char* bad : {"null", "7", "[1, -1]", "[1, 2147483648]", "[1.5]", "[\"3\"]"}) {
    absl::Status st = AppendTokenIds(nlohmann::json::parse(bad), "tokens", &ids);
    EXPECT_EQ(RequestParam(st), "tokens") << bad;
  }
}

TEST(OpenAiRequestTest, BodiesThatAreNotJsonObjectsAreRefused) {
  const std::string bad[] = {
      "",
      "{",
      "[]",
      "\"x\"",
      "{\"prompt\": \"x\",}",
      "{\"prompt\": \"\xff\xfe\"}",
      "{\"prompt\": \"x\", \"prompt\": \"y\"}",  // duplicate keys: two readers, two meanings
      std::string(100, '[') + std::string(100, ']'),
      "{\"prompt\": \"x\", \"stop\": " + std::string(20, '[') + std::string(20, ']') + "}",
  };
  for (const std::string& body : bad) {
    auto r = ParseCompletionRequest(body, OpenAiDefaults{}, 1);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  }
}

TEST(OpenAiRequestTest, ChatMessagesAreRenderedAndEndAtTheEndOfMessage) {
  ByteTokenizer tokenizer;
  const ChatTemplate chat = Chat();
  auto r = ParseChatRequest(
      R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "H"}, {"type": "text", "text": "i"}]},
          {"role": "assistant", "content": null}, {"role": "user", "content": "?", "name": "x"}],
          "max_completion_tokens": 5, "seed": 3})",
      &chat, tokenizer, OpenAiDefaults{}, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  auto want = chat.Render(
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", ""}, {"user", "?"}}, tokenizer);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(
      std::vector<int32_t>(r->request.tokens().ids().begin(), r->request.tokens().ids().end()),
      *want);
  EXPECT_TRUE(r->chat);
  EXPECT_EQ(r->request.sampling().max_new_tokens(), 5u);
  ASSERT_EQ(r->request.sampling().stop_token_ids_size(), 1);
  EXPECT_EQ(r->request.sampling().stop_token_ids(0), 261);
  EXPECT_EQ(r->hidden_token_ids, std::vector<int32_t>{261});
}

TEST(OpenAiRequestTest, ChatDefaultMaxTokensFitsTheContext) {
  ByteTokenizer tokenizer;
  const ChatTemplate chat = Chat();
  OpenAiDefaults defaults;
  defaults.chat_max_tokens = 256;
  defaults.max_seq_len = 40;
  auto r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "Hi"}]})", &chat,
                            tokenizer, defaults, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.sampling().max_new_tokens() + r->request.tokens().ids_size(), 40u);
}

TEST(OpenAiRequestTest, ChatRefusalsNameTheField) {
  ByteTokenizer tokenizer;
  const ChatTemplate chat = Chat();
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"prompt": "x", "messages": [{"role": "user", "content": "x"}]})", "prompt"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 21})",
       "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2,
           "max_completion_tokens": 2})",
       "max_completion_tokens"},
  };
  for (const Case& c : cases) {
    auto r = ParseChatRequest(c.body, &chat, tokenizer, OpenAiDefaults{}, 1);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(RequestParam(r.status()), c.param) << c.body << ": " << r.status();
  }
  auto no_template = ParseChatRequest(R"({"messages": [{"role": "user", "content": "x"}]})",
                                      nullptr, tokenizer, OpenAiDefaults{}, 1);
  EXPECT_EQ(RequestParam(no_template.status()), "messages");
}

}  // namespace
}  // namespace yoco
