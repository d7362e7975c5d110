// Logs as a log pipeline reads them: with --log-format json every line our three services write
// is one JSON object naming its program, and the router's access log line for a request carries
// its id, outcome, token counts and the workers that served it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

// The log's lines that are ours (JSON objects); lines of the libraries beneath (UCX) are not.
std::vector<nlohmann::json> JsonLines(const std::string& log) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (line.front() != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << line;
    out.push_back(std::move(j));
  }
  return out;
}

TEST(ClusterLogsTest, JsonLinesAndTheAccessLogNameTheRequestAndItsWorkers) {
  ClusterOptions options;
  options.worker_flags = {"--log-format", "json"};
  options.router_flags = {"--log-format", "json"};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;

  v1::GenerateRequest request = Request(RandomPrompt(3, 40), 8);
  request.set_request_id("follow-me-7");
  const Generated got = c.Generate(request);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();

  for (Service* service : {&c.router(), &c.prefill(0), &c.decode(0)}) {
    const std::vector<nlohmann::json> lines = JsonLines(service->process().Log());
    ASSERT_FALSE(lines.empty()) << service->process().Log();
    bool serving = false;
    for (const nlohmann::json& j : lines) {
      EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("program")) << j;
      serving |= j.value("message", "") == absl::StrCat("serving on port ", service->port());
    }
    EXPECT_TRUE(serving) << service->process().Log();
  }

  std::vector<nlohmann::json> access;
  for (const nlohmann::json& j : JsonLines(c.router().process().Log())) {
    if (j.value("message", "") == "request finished" &&
        j.value("request_id", "") == "follow-me-7") {
      access.push_back(j);
    }
  }
  ASSERT_EQ(access.size(), 1u) << c.router().process().Log();
  const nlohmann::json& line = access[0];
  EXPECT_EQ(line["program"], "yoco-router");
  EXPECT_EQ(line["outcome"], "ok");
  EXPECT_EQ(line["prompt_tokens"], 40);
  EXPECT_EQ(line["generated_tokens"], 8);
  EXPECT_EQ(line["decode"], c.decode(0).address());
  // A 40-token prompt is short: the decode worker may have prefilled it itself.
  if (line["prefill"] != "local") {
    EXPECT_EQ(line["prefill"], c.prefill(0).address());
  }
}

}  // namespace
}  // namespace yoco::testing
