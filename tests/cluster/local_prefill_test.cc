// Conditional disaggregation end to end: a router with --local-prefill-max-tokens 300 in front of
// one prefill worker and two decode workers, the second with --local-prefill=false. Prompts up to
// 300 tokens are prefilled on the first decode worker, longer ones are shipped, and every answer
// equals the in-process engine's, on lengths around the cache's 128-token grid, greedy and
// sampled (through a second router that knows only the first decode worker: the cluster's router
// may send a prompt to either, and shipping to the second is right but not what this checks). A
// prompt whose prefix is cached goes to the prefill worker however short. Killing the decode worker
// mid-stream after a local prefill loses no token; a decode worker that does not prefill is never
// asked to; forged local prefills are refused.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

TEST(ClusterLocalPrefillTest, ShortPromptsArePrefilledWhereTheyAreDecoded) {
  ClusterOptions options;
  options.decode_workers = 2;
  options.decode_flags_each = {{}, {"--local-prefill=false"}};
  const std::vector<std::string> router_flags = {"--local-prefill-max-tokens", "300",
                                                 "--snapshot-conversations=false"};
  options.router_flags = router_flags;
  auto started = ServingCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  ServingCluster& c = **started;
  Service &prefills = c.decode(0), &never = c.decode(1);

  std::vector<std::string> flags = {
      "--model",  TinyModelDir(),     "--prefill",           c.prefill(0).address(),
      "--decode", prefills.address(), "--probe-interval-ms", "200"};
  flags.insert(flags.end(), router_flags.begin(), router_flags.end());
  auto grid_router = Service::Start(Role::kRouter, flags, c.dir() + "/grid-router");
  ASSERT_TRUE(grid_router.ok()) << grid_router.status();
  auto grid = v1::Yoco::NewStub((*grid_router)->Channel());
  ASSERT_TRUE(WaitFor(
      [&] {
        return Generate(*grid, Request({0, 5}, 1)).status.ok();
      },
      absl::Seconds(60)));

  const double counted = prefills.Metric("yoco_decode_local_prefills_total");
  const double router_counted = (*grid_router)->Metric("yoco_router_local_prefills_total");
  for (int length : {1, 2, 127, 128, 129, 255, 256, 257, 300, 301, 383}) {
    for (bool sampled : {false, true}) {
      SCOPED_TRACE(absl::StrCat("length ", length, sampled ? " sampled" : " greedy"));
      SamplingParams sampling;
      if (sampled) {
        sampling.temperature = 0.8f;
        sampling.top_k = 20;
        sampling.seed = length;
      }
      const std::vector<int32_t> prompt = RandomPrompt(length, length);
      const Generated got = Generate(*grid, Request(prompt, 12, sampling));
      EXPECT_TRUE(got.status.ok()) << got.status.error_message();
      EXPECT_EQ(got.tokens, InProcessTokens(prompt, 12, sampling));
      EXPECT_EQ(got.finish.local_prefill(), length <= 300);
    }
  }
  EXPECT_EQ(prefills.Metric("yoco_decode_local_prefills_total") - counted, 18);
  EXPECT_EQ((*grid_router)->Metric("yoco_router_local_prefills_total") - router_counted, 18);

  // A cached prefix: the prefill worker resumes from it, however short the prompt.
  const std::vector<int32_t> doc = RandomPrompt(77, 256);
  v1::PrecacheRequest precache;
  precache.mutable_tokens()->mutable_ids()->Add(doc.begin(), doc.end());
  v1::PrecacheResponse held;
  grpc::ClientContext context;
  ASSERT_TRUE(c.stub().Precache(&context, precache, &held).ok());
  std::vector<int32_t> prompt = doc;
  prompt.insert(prompt.end(), {7, 8, 9});
  const Generated cached = c.Generate(Request(prompt, 8));
  EXPECT_EQ(cached.tokens, InProcessTokens(prompt, 8));
  EXPECT_FALSE(cached.finish.local_prefill());
  EXPECT_EQ(cached.finish.usage().cached_prompt_tokens(), 256u);

  // Forged local prefills straight to the decode workers: refused (INVALID_ARGUMENT where it
  // prefills, FAILED_PRECONDITION where it does not).
  for (auto [worker, prefills_here] : {std::pair{&prefills, "yes"}, std::pair{&never, "no"}}) {
    const ToolRun forged =
        RunToCompletion(BinaryPath("forged_call"),
                        {"local-prefill", worker->address(), prefills_here}, c.dir() + "/forged");
    EXPECT_EQ(forged.status, 0) << forged.output;
  }

  // The decode worker that prefilled is killed mid-stream: the router continues on the other
  // with the tokens sent so far (600 tokens: the retry's prefill matches decoding to rounding
  // only).
  const std::vector<int32_t> long_prompt = RandomPrompt(5, 40);
  {
    grpc::ClientContext stream_context;
    auto stream = c.stub().Generate(&stream_context, Request(long_prompt, 600));
    std::vector<int32_t> tokens;
    v1::GenerateResponse event;
    ASSERT_TRUE(stream->Read(&event));
    tokens.push_back(event.token().id());
    // Both idle, the router picked the first (the forged calls above ran since the last request,
    // so the router has long counted that one out).
    ASSERT_TRUE(WaitFor([&] { return prefills.Metric("yoco_decode_active_sequences") == 1; },
                        absl::Seconds(10)));
    const double retries = c.router().Metric("yoco_router_retries_total");
    prefills.process().Kill();
    v1::Finish finish;
    while (stream->Read(&event)) {
      if (event.has_token()) tokens.push_back(event.token().id());
      if (event.has_finish()) finish = event.finish();
    }
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_EQ(tokens, InProcessTokens(long_prompt, 600));
    EXPECT_TRUE(finish.local_prefill());
    EXPECT_EQ(c.router().Metric("yoco_router_retries_total"), retries + 1);
  }

  // Only the worker without local prefill is left: short prompts are shipped to it.
  const std::vector<int32_t> short_prompt = RandomPrompt(9, 30);
  for (int i = 0; i < 2; ++i) {
    const Generated shipped = c.Generate(Request(short_prompt, 8));
    EXPECT_TRUE(shipped.status.ok()) << shipped.status.error_message();
    EXPECT_EQ(shipped.tokens, InProcessTokens(short_prompt, 8));
    EXPECT_FALSE(shipped.finish.local_prefill());
  }
  EXPECT_EQ(never.Metric("yoco_decode_local_prefills_total"), 0);
}

}  // namespace
}  // namespace yoco::testing
