// The OpenAI response shapes: the fields clients read, exactly.
#include "lib/openai/openai_response.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

using json = nlohmann::json;

v1::Usage Usage(uint32_t prompt, uint32_t cached, uint32_t generated) {
  v1::Usage usage;
  usage.set_prompt_tokens(prompt);
  usage.set_cached_prompt_tokens(cached);
  usage.set_generated_tokens(generated);
  return usage;
}

TEST(OpenAiResponseTest, CompletionAndChatCompletionShapes) {
  CompletionHeader header{false, "cmpl-1", 1700000000, "m"};
  json c = CompletionJson(header, "hi", v1::FINISH_REASON_EOS, Usage(10, 8, 3));
  EXPECT_EQ(c, json::parse(R"({"id": "cmpl-1", "object": "text_completion", "created": 1700000000,
      "model": "m", "choices": [{"index": 0, "text": "hi", "logprobs": null,
      "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3,
      "total_tokens": 13, "prompt_tokens_details": {"cached_tokens": 8}}})"));
  header.chat = true;
  json chat = CompletionJson(header, "yo", v1::FINISH_REASON_LENGTH, Usage(5, 0, 2));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"],
            json::parse(R"({"role": "assistant", "content": "yo"})"));
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chat["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(OpenAiResponseTest, SeveralChoicesAreIndexedInOrder) {
  CompletionHeader header{false, "cmpl-2", 1, "m"};
  json c = CompletionJson(header,
                          {{"a", v1::FINISH_REASON_LENGTH, nullptr},
                           {"b", v1::FINISH_REASON_STOP, json::object({{"tokens", {"b"}}})}},
                          Usage(3, 0, 5));
  ASSERT_EQ(c["choices"].size(), 2u);
  EXPECT_EQ(c["choices"][1], json::parse(R"({"index": 1, "text": "b", "finish_reason": "stop",
      "logprobs": {"tokens": ["b"]}})"));
  EXPECT_EQ(c["choices"][0]["index"], 0);
  EXPECT_EQ(c["usage"]["completion_tokens"], 5);
  header.chat = true;
  EXPECT_EQ(
      ChunkJson(header, std::string("x"), true, std::nullopt, nullptr, 3)["choices"][0]["index"],
      3);
}

TEST(OpenAiResponseTest, ChunksCarryRoleFirstAndFinishLast) {
  CompletionHeader header{true, "chatcmpl-1", 1, "m"};
  json first = ChunkJson(header, std::string("a"), true, std::nullopt);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": "a"})"));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  json last = ChunkJson(header, std::nullopt, false, v1::FINISH_REASON_STOP);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  json usage = UsageChunkJson(header, Usage(4, 0, 1));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
  header.chat = false;
  EXPECT_EQ(ChunkJson(header, std::string("b"), true, std::nullopt)["choices"][0]["text"], "b");
}

TEST(OpenAiResponseTest, ServerSentEventFramingReplacesInvalidUtf8) {
  EXPECT_EQ(SseEvent(json{{"a", "x\xff"}}), "data: {\"a\":\"x\xEF\xBF\xBD\"}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
}

TEST(OpenAiResponseTest, StatusCodesMapToHttpStatusesAndErrorShape) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(ErrorJson(absl::StatusCode::kInvalidArgument, "n: no", "n"),
            json::parse(R"({"error": {"message": "n: no", "type": "invalid_request_error",
                "param": "n", "code": "invalid_argument"}})"));
  EXPECT_TRUE(ErrorJson(absl::StatusCode::kUnavailable, "x", "")["error"]["param"].is_null());
}

}  // namespace
}  // namespace yoco
