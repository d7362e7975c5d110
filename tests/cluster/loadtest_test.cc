// yoco-loadtest end to end against a cluster, bounded to seconds: a closed-loop rag run with its
// documents pre-cached (every request a hit) whose report agrees with what the router counted;
// open-loop arrivals, a rate sweep, chat sessions, a replayed file; the same workload through the
// OpenAI HTTP API; refusals of what the tool cannot do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// A JSONL file's records, by their "index".
std::vector<json> ReadJsonl(const std::string& path) {
  std::vector<json> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) records.push_back(json::parse(line, nullptr, false));
  }
  auto index = [](const json& r) { return r.is_object() ? r.value("index", -1) : -1; };
  std::sort(records.begin(), records.end(),
            [&](const json& a, const json& b) { return index(a) < index(b); });
  return records;
}

bool IsPng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return std::string(magic + 1, 3) == "PNG";
}

bool HaveGnuplot() { return std::filesystem::exists("/usr/bin/gnuplot"); }

class LoadtestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http_port_ = FreePort();
    ClusterOptions options;
    options.router_flags = {"--snapshot-conversations=false", "--http-listen",
                            absl::StrCat("127.0.0.1:", http_port_)};
    auto cluster = ServingCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) ADD_FAILURE() << cluster_->Logs();
  }

  std::string Path(const std::string& name) const { return cluster_->dir() + "/" + name; }
  std::vector<std::string> Grpc() const { return {"--router", cluster_->router().address()}; }
  std::vector<std::string> Http() const {
    return {"--http", absl::StrCat("http://127.0.0.1:", http_port_), "--vocab-size", "512"};
  }

  // yoco-loadtest with `target` (Grpc() or Http()) and `args`, run to its end.
  ToolRun Loadtest(std::vector<std::string> target, const std::vector<std::string>& args,
                   const std::string& name) {
    target.insert(target.end(), args.begin(), args.end());
    return RunToCompletion(BinaryPath("yoco-loadtest"), target, Path(name + ".out"),
                           absl::Seconds(120));
  }

  int http_port_ = 0;
  std::unique_ptr<ServingCluster> cluster_;
};

TEST_F(LoadtestTest, ARagRunReportsWhatTheRouterCounted) {
  const std::string metrics =
      absl::StrCat("http://127.0.0.1:", cluster_->router().metrics_port(), "/metrics");
  std::vector<std::string> args = {"--workload",
                                   "rag",
                                   "--documents",
                                   "2",
                                   "--document-tokens",
                                   "300",
                                   "--question-tokens",
                                   "16",
                                   "--output-tokens",
                                   "8",
                                   "--requests",
                                   "24",
                                   "--concurrency",
                                   "4",
                                   "--precache",
                                   "--seed",
                                   "1",
                                   "--slo",
                                   "ttft=60000,tpot=60000",
                                   "--json",
                                   Path("rag.json"),
                                   "--jsonl",
                                   Path("rag.jsonl"),
                                   "--scrape",
                                   metrics,
                                   "--quiet"};
  if (HaveGnuplot()) args.insert(args.end(), {"--plot", Path("rag.png")});
  const ToolRun run = Loadtest(Grpc(), args, "rag");
  ASSERT_EQ(run.status, 0) << run.output;

  const json s = ReadJson(Path("rag.json"));
  ASSERT_TRUE(s.is_object()) << run.output;
  EXPECT_EQ(s["requests"], 24);
  EXPECT_EQ(s["ok"], 24);
  EXPECT_TRUE(s["errors"].empty()) << s["errors"];
  for (const char* k : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    const json& q = s[k];
    ASSERT_TRUE(q.contains("p50") && q.contains("p90") && q.contains("p99") && q.contains("max"))
        << k;
    EXPECT_TRUE(q["p50"] <= q["p90"] && q["p90"] <= q["p99"] && q["p99"] <= q["max"]) << k << q;
  }
  EXPECT_EQ(s["cache_hit_rate"], 1.0) << "the documents were pre-cached";
  // Each prompt is 300 + 16 tokens; a hit covers the document's 256-token block boundary.
  EXPECT_NEAR(s["cached_token_fraction"].get<double>(), 256.0 / 316, 1e-9);
  EXPECT_GT(s["requests_per_s"].get<double>(), 0);
  EXPECT_EQ(s["goodput_requests_per_s"], s["requests_per_s"]) << "all within a generous SLO";
  EXPECT_NEAR(s["output_tokens_per_s"].get<double>() * s["duration_s"].get<double>(), 24 * 8, 1e-6);
  const json& delta = s["server_metrics_delta"][metrics];
  EXPECT_EQ(delta.value("yoco_router_requests_total{outcome=\"ok\"}", -1.0), 24) << delta;
  EXPECT_EQ(delta.value("yoco_router_cache_hits_total", -1.0), 24) << delta;

  const std::vector<json> lines = ReadJsonl(Path("rag.jsonl"));
  ASSERT_EQ(lines.size(), 24u);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    EXPECT_EQ(lines[i]["output_tokens"], 8);
    EXPECT_EQ(lines[i]["itl_ms"].size(), 7u);
  }
  if (HaveGnuplot()) EXPECT_TRUE(IsPng(Path("rag.png")));
}

TEST_F(LoadtestTest, OpenLoopArrivalsAndRateSweeps) {
  // Constant arrivals: 12 requests at 40/s start 25 ms apart.
  ToolRun run = Loadtest(Grpc(),
                         {"--workload", "random", "--input-tokens", "40", "--input-spread", "8",
                          "--output-tokens", "4", "--requests", "12", "--rate", "40", "--arrivals",
                          "constant", "--seed", "2", "--jsonl", Path("random.jsonl"), "--quiet"},
                         "random");
  ASSERT_EQ(run.status, 0) << run.output;
  std::vector<double> starts;
  for (const json& l : ReadJsonl(Path("random.jsonl"))) starts.push_back(l["start_s"]);
  ASSERT_EQ(starts.size(), 12u);
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    EXPECT_NEAR(starts[i] - starts[i - 1], 0.025, 0.02) << "start " << i;
  }

  // Two rates that hold a generous SLO (the second 1.5 times the first), then one that cannot
  // hold an impossible one.
  std::vector<std::string> sweep = {"--workload",
                                    "random",
                                    "--input-tokens",
                                    "40",
                                    "--output-tokens",
                                    "4",
                                    "--requests",
                                    "4",
                                    "--rate",
                                    "4",
                                    "--sweep",
                                    "--sweep-steps",
                                    "2",
                                    "--slo",
                                    "ttft=60000",
                                    "--seed",
                                    "3",
                                    "--json",
                                    Path("sweep.json"),
                                    "--jsonl",
                                    Path("sweep.jsonl"),
                                    "--quiet"};
  if (HaveGnuplot()) sweep.insert(sweep.end(), {"--plot", Path("sweep.png")});
  run = Loadtest(Grpc(), sweep, "sweep");
  ASSERT_EQ(run.status, 0) << run.output;
  const json s = ReadJson(Path("sweep.json"));
  std::vector<double> rates;
  for (const json& step : s["steps"]) rates.push_back(step["offered_rate"]);
  EXPECT_EQ(rates, (std::vector<double>{4, 6}));
  EXPECT_EQ(s["max_sustainable_rate"], 6);
  const std::vector<json> lines = ReadJsonl(Path("sweep.jsonl"));
  ASSERT_EQ(lines.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(lines[i]["index"], i);
  if (HaveGnuplot()) EXPECT_TRUE(IsPng(Path("sweep.png")));

  run = Loadtest(Grpc(),
                 {"--workload", "random", "--input-tokens", "40", "--output-tokens", "4",
                  "--requests", "4", "--rate", "4", "--sweep", "--slo", "ttft=0.001", "--seed", "4",
                  "--json", Path("broken.json"), "--quiet"},
                 "broken");
  ASSERT_EQ(run.status, 0) << run.output;
  const json broken = ReadJson(Path("broken.json"));
  EXPECT_EQ(broken["steps"].size(), 1u);
  EXPECT_EQ(broken["max_sustainable_rate"], 0);
}

TEST_F(LoadtestTest, ChatSessionsAndAReplayedFile) {
  // Each turn repeats the last one's prompt and answer, and hits its snapshot.
  ToolRun run =
      Loadtest(Grpc(),
               {"--workload", "chat", "--turns", "3", "--system-tokens", "128", "--user-tokens",
                "32", "--output-tokens", "8", "--requests", "6", "--concurrency", "2", "--seed",
                "5", "--jsonl", Path("chat.jsonl"), "--quiet"},
               "chat");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::vector<json> chat = ReadJsonl(Path("chat.jsonl"));
  ASSERT_EQ(chat.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(chat[i]["index"], i);
    EXPECT_EQ(chat[i]["prompt_tokens"], 160 + (i % 3) * 40) << "turn " << i;
    if (i % 3 != 0) EXPECT_GE(chat[i]["cached_tokens"], 128) << "turn " << i;
  }

  // Requests at the file's timestamps; a text prompt tokenised by the router.
  std::ofstream(Path("replay.jsonl"))
      << R"({"timestamp_ms": 0, "prompt_tokens": [0, 9, 10, 11], "max_tokens": 3})"
      << "\n"
      << R"({"timestamp_ms": 300, "prompt": "hello there", "max_tokens": 2})"
      << "\n";
  run = Loadtest(Grpc(),
                 {"--workload", "replay", "--replay", Path("replay.jsonl"), "--jsonl",
                  Path("replayed.jsonl"), "--quiet"},
                 "replay");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::vector<json> replayed = ReadJsonl(Path("replayed.jsonl"));
  ASSERT_EQ(replayed.size(), 2u);
  EXPECT_EQ(replayed[0]["prompt_tokens"], 4);
  EXPECT_EQ(replayed[0]["output_tokens"], 3);
  EXPECT_EQ(replayed[1]["prompt_tokens"], 12);
  EXPECT_EQ(replayed[1]["output_tokens"], 2);
  const double gap = replayed[1]["start_s"].get<double>() - replayed[0]["start_s"].get<double>();
  EXPECT_GT(gap, 0.25);
  EXPECT_LT(gap, 0.45);
}

TEST_F(LoadtestTest, TheHttpApiGetsTheSameWorkloadAndBadRunsAreRefused) {
  // The same prompts through the OpenAI HTTP API, arrivals measured from the SSE chunks (this
  // random model's ids past the bytes have no text, so a chunk may carry more than one token: at
  // most 5 gaps for 6 tokens), the model found in /v1/models.
  const std::vector<std::string> workload = {
      "--workload", "random", "--input-tokens", "40", "--input-spread", "8", "--output-tokens", "6",
      "--requests", "8",      "--concurrency",  "3",  "--seed",         "6", "--quiet"};
  std::vector<std::string> args = workload;
  args.insert(args.end(), {"--jsonl", Path("http.jsonl")});
  ToolRun run = Loadtest(Http(), args, "http");
  ASSERT_EQ(run.status, 0) << run.output;
  args = workload;
  args.insert(args.end(), {"--jsonl", Path("grpc.jsonl")});
  run = Loadtest(Grpc(), args, "grpc");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::vector<json> http = ReadJsonl(Path("http.jsonl"));
  const std::vector<json> grpc = ReadJsonl(Path("grpc.jsonl"));
  ASSERT_EQ(http.size(), 8u);
  ASSERT_EQ(grpc.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const json& h = http[i];
    EXPECT_EQ(h["status"], "OK") << h;
    EXPECT_EQ(h["output_tokens"], 6) << h;
    EXPECT_GE(h["itl_ms"].size(), 1u) << h;
    EXPECT_LE(h["itl_ms"].size(), 5u) << h;
    EXPECT_GT(h["ttft_ms"].get<double>(), 0) << h;
    EXPECT_EQ(h["finish_reason"], "length") << h;
    EXPECT_EQ(h["prompt_tokens"], grpc[i]["prompt_tokens"]) << i;
  }

  run = Loadtest(Http(), {"--workload", "chat", "--requests", "2", "--concurrency", "1"},
                 "http-chat");
  EXPECT_NE(run.status, 0);
  EXPECT_TRUE(absl::StrContains(run.output, "needs the gRPC API")) << run.output;
  run = Loadtest(Grpc(), {"--workload", "chaos", "--requests", "1", "--concurrency", "1"}, "chaos");
  EXPECT_NE(run.status, 0);
  EXPECT_TRUE(absl::StrContains(run.output, "not rag, shared-prefix, chat, random or replay"))
      << run.output;
}

}  // namespace
}  // namespace yoco::testing
