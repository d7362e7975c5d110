// The Python client (clients/python) against a cluster secured as a deployment is (mutual TLS),
// as a RAG user runs it: the example pre-caches three documents and asks two questions about
// each. Every answer must reuse its document's snapshot and equal, token for token (and in its
// log-probability), what the C++ client gets for the same prompt.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

TEST(ClusterPythonClientTest, TheRagExampleReusesEachDocumentAndMatchesTheCppClient) {
  ClusterOptions options;
  options.secure = true;
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;
  const ToolRun run = RunToCompletion(
      "/usr/bin/env",
      {absl::StrCat("PYTHONPATH=", YOCO_PYTHON_STUBS_DIR, ":", YOCO_PYTHON_CLIENT_DIR),
       "/usr/bin/python3", absl::StrCat(YOCO_PYTHON_CLIENT_DIR, "/examples/rag.py"), "--router",
       c.router().address(), "--tls-ca", c.dir() + "/ca.pem", "--tls-cert", c.dir() + "/client.pem",
       "--tls-key", c.dir() + "/client.key", "--max-new-tokens", "12", "--show-prompts"},
      c.dir() + "/rag.log", absl::Seconds(120));
  ASSERT_EQ(run.status, 0) << run.output;

  std::map<int, int> document_cached;
  int answers = 0, extracted = 0, verdicts = 0;
  for (absl::string_view line : absl::StrSplit(run.output, '\n', absl::SkipEmpty())) {
    if (line.front() != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("extracted")) {  // structured output: the schema's object
      const nlohmann::json& r = j["extracted"];
      ++extracted;
      EXPECT_EQ(j["finish_reason"], "eos") << line;
      ASSERT_TRUE(r.is_object()) << line;
      EXPECT_EQ(r.size(), 2u) << line;
      EXPECT_TRUE(r["year"].is_number_integer()) << line;
      ASSERT_TRUE(r["place"].is_string()) << line;
      EXPECT_LE(r["place"].get<std::string>().size(), 80u) << line;  // 20 code points
      continue;
    }
    if (j.contains("verdict")) {  // a regex: "yes|no"
      ++verdicts;
      EXPECT_EQ(j["finish_reason"], "eos") << line;
      EXPECT_TRUE(j["verdict"] == "yes" || j["verdict"] == "no") << line;
      continue;
    }
    if (!j.contains("answer")) {
      EXPECT_GE(j["cached_tokens"].get<int>(), 128) << line;  // a snapshot of the document
      document_cached[j["document"].get<int>()] = j["cached_tokens"].get<int>();
      continue;
    }
    ++answers;
    EXPECT_EQ(j["cached_prompt_tokens"], document_cached.at(j["document"].get<int>())) << line;
    v1::GenerateRequest request;
    request.set_text(j["prompt"].get<std::string>());
    request.mutable_sampling()->set_max_new_tokens(12);
    request.mutable_sampling()->set_stop_at_eos(true);
    request.mutable_sampling()->set_logprobs(0);
    const Generated want = c.Generate(request);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), want.tokens) << line;
    double logprob = 0;  // summed in the same order as the client's sum()
    for (const v1::GeneratedToken& token : want.messages) logprob += token.logprob().logprob();
    EXPECT_NEAR(j["logprob"].get<double>(), logprob, 1e-9) << line;
    EXPECT_LT(logprob, 0) << line;
    // Scored afterwards, each answer token has the logprob it was generated with.
    const auto generated = j["token_logprobs"].get<std::vector<double>>();
    const auto scored = j["scored_tail"].get<std::vector<double>>();
    ASSERT_EQ(scored.size(), generated.size()) << line;
    for (size_t i = 0; i < scored.size(); ++i) EXPECT_NEAR(scored[i], generated[i], 2e-4) << line;
    EXPECT_EQ(j["answer"].get<std::string>(), want.text) << line;
    const std::string id = j["request_id"].get<std::string>();
    ASSERT_EQ(id.rfind("rag-doc", 0), 0u) << line;
    // The candidates (n = 3, seed 10·document + question): each the one-choice answer of its
    // choice's seed.
    const uint64_t seed = 10 * j["document"].get<uint64_t>() + (id.back() - '0');
    ASSERT_EQ(j["candidates"].size(), 3u) << line;
    for (uint32_t i = 0; i < 3; ++i) {
      request.mutable_sampling()->set_temperature(0.8f);
      request.mutable_sampling()->set_seed(ChoiceSeed(seed, i));
      const Generated one = c.Generate(request);
      ASSERT_TRUE(one.status.ok()) << one.status.error_message();
      const nlohmann::json& candidate = j["candidates"][i];
      EXPECT_EQ(candidate["token_ids"].get<std::vector<int32_t>>(), one.tokens) << line;
      double sum = 0;
      for (const v1::GeneratedToken& token : one.messages) sum += token.logprob().logprob();
      EXPECT_NEAR(candidate["logprob"].get<double>(), sum, 1e-9) << line;
    }
  }
  EXPECT_EQ(document_cached.size(), 3u) << run.output;
  EXPECT_EQ(answers, 6) << run.output;
  EXPECT_EQ(extracted, 3) << run.output;
  EXPECT_EQ(verdicts, 3) << run.output;
}

}  // namespace
}  // namespace yoco::testing
