// The HTTP load path's pure parts: the SSE stream split in arbitrary pieces, what a chunk of an
// OpenAI completion stream records, the request body, endpoints and status names.
#include "loadtest/http_completion.h"

#include "gtest/gtest.h"
#include "loadtest/sse_stream.h"

namespace yoco {
namespace {

TEST(SseStreamTest, EventsCompleteAtBlankLinesWhateverThePieces) {
  const std::string stream =
      ": a comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    SseStream sse;
    std::vector<std::string> events;
    for (size_t at = 0; at < stream.size(); at += piece) {
      for (std::string& e : sse.Feed(absl::string_view(stream).substr(at, piece))) {
        events.push_back(std::move(e));
      }
    }
    ASSERT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "one\ntwo", "[DONE]"})) << piece;
  }
  SseStream unfinished;
  EXPECT_TRUE(unfinished.Feed("data: half").empty());
  EXPECT_TRUE(unfinished.Feed("\n").empty());
  EXPECT_EQ(unfinished.Feed("\n"), (std::vector<std::string>{"half"}));
}

TEST(HttpCompletionTest, ChunksRecordTokensUsageAndTheFinish) {
  RequestRecord r;
  double last = 0;
  // Ours: a chunk per token (empty text mid UTF-8), an empty finishing chunk, then usage.
  EXPECT_TRUE(
      RecordCompletionEvent(R"({"choices":[{"text":"a","finish_reason":null}]})", 10, &last, &r));
  EXPECT_TRUE(
      RecordCompletionEvent(R"({"choices":[{"text":"","finish_reason":null}]})", 15, &last, &r));
  EXPECT_TRUE(RecordCompletionEvent(R"({"choices":[{"text":"","finish_reason":"length"}]})", 16,
                                    &last, &r));
  EXPECT_EQ(r.output_tokens, 2u);
  EXPECT_DOUBLE_EQ(r.ttft_ms, 10);
  EXPECT_EQ(r.itl_ms, (std::vector<double>{5}));
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_TRUE(
      RecordCompletionEvent(R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,)"
                            R"("prompt_tokens_details":{"cached_tokens":32}}})",
                            17, &last, &r));
  EXPECT_EQ(r.prompt_tokens, 40u);
  EXPECT_EQ(r.cached_tokens, 32u);
  EXPECT_FALSE(RecordCompletionEvent("[DONE]", 18, &last, &r));
  // Others send the last token's text together with its finish reason: still a token.
  RequestRecord v;
  double last_v = 0;
  RecordCompletionEvent(R"({"choices":[{"text":"x","finish_reason":null}]})", 3, &last_v, &v);
  RecordCompletionEvent(R"({"choices":[{"text":"y","finish_reason":"stop"}]})", 7, &last_v, &v);
  EXPECT_EQ(v.output_tokens, 2u);
  EXPECT_EQ(v.itl_ms, (std::vector<double>{4}));
  EXPECT_EQ(v.finish_reason, "stop");
  // Garbage is ignored, not fatal.
  EXPECT_TRUE(RecordCompletionEvent("not json", 9, &last_v, &v));
  EXPECT_EQ(v.output_tokens, 2u);
}

TEST(HttpCompletionTest, TheBodyAsksForExactlyMaxTokensStreamedWithUsage) {
  PlannedRequest plan;
  plan.prompt = {0, 17, 5};
  plan.max_tokens = 9;
  CompletionParams params;
  params.seed = 4;
  params.cache_salt = "s";
  const nlohmann::json body = nlohmann::json::parse(CompletionBody(plan, "m", params));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], (std::vector<int>{0, 17, 5}));  // as over gRPC, BOS included
  EXPECT_EQ(body["max_tokens"], 9);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["seed"], 4);
  EXPECT_EQ(body["cache_salt"], "s");
  plan.text = "hello";
  EXPECT_EQ(nlohmann::json::parse(CompletionBody(plan, "m", {}))["prompt"], "hello");
  EXPECT_FALSE(nlohmann::json::parse(CompletionBody(plan, "m", {})).contains("cache_salt"));
}

TEST(HttpCompletionTest, EndpointsAndStatusNames) {
  auto e = ParseHttpEndpoint("http://127.0.0.1:8000/v1/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, "8000");
  EXPECT_TRUE(ParseHttpEndpoint("http://router:80").ok());
  for (const char* bad : {"https://x:1", "http://x", "http://:80", "http://x:0", "http://x:70000",
                          "http://x:80/other", "x:80"}) {
    EXPECT_FALSE(ParseHttpEndpoint(bad).ok()) << bad;
  }
  EXPECT_EQ(StatusNameOfHttp(200), "OK");
  EXPECT_EQ(StatusNameOfHttp(429), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusNameOfHttp(503), "UNAVAILABLE");
  EXPECT_EQ(StatusNameOfHttp(504), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusNameOfHttp(418), "HTTP_418");
  EXPECT_EQ(StatusNameOfHttp(500), "INTERNAL");
}

}  // namespace
}  // namespace yoco
