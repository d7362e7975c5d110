// Rolling updates: workers of two model versions (the same shape, other weights) serve side by
// side, and the router pairs only workers of one version, so every answer is exactly one
// version's; replacing every worker one by one under load (SIGTERM, drain, start with the new
// model, as a StatefulSet's rollout does) fails no request. A worker given another vocabulary
// (--tiktoken-ranks) than the router's is never used, and the router says why.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr int kNewTokens = 8;

class ClusterRolloutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir();
    new_model_ = dir_ + "/yoco-tiny-v2";  // the tiny model's shape, other weights
    const ToolRun made = RunToCompletion(BinaryPath("yoco"),
                                         {"init-model", "--params", TinyModelDir() + "/params.json",
                                          "--seed", "4", "--out", new_model_},
                                         dir_ + "/init-model.log");
    ASSERT_EQ(made.status, 0) << made.output;
    // Long prompts go to a prefill worker, short ones are prefilled by the decode worker.
    for (int i = 0; i < 6; ++i) {
      prompts_.push_back(RandomPrompt(100 + i, i % 2 == 0 ? 200 : 24));
      old_.push_back(InProcessTokens(prompts_.back(), kNewTokens));
      new_.push_back(InProcessTokens(prompts_.back(), kNewTokens, {}, new_model_));
      ASSERT_NE(old_.back(), new_.back()) << "the two versions must answer differently";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Which version answered prompt i: 0 old, 1 new, -1 neither (a mix, or wrong).
  int VersionOf(size_t i, const std::vector<int32_t>& tokens) const {
    if (tokens == old_[i]) return 0;
    if (tokens == new_[i]) return 1;
    return -1;
  }

  std::string dir_, new_model_;
  std::vector<std::vector<int32_t>> prompts_, old_, new_;
};

TEST_F(ClusterRolloutTest, WorkersOfTwoVersionsArePairedByVersion) {
  ClusterOptions options;
  options.prefill_workers = 2;
  options.decode_workers = 2;
  options.prefill_flags_each = {{}, {"--model", new_model_}};
  options.decode_flags_each = {{}, {"--model", new_model_}};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<v1::GenerateRequest> requests;
  for (int round = 0; round < 3; ++round) {
    for (const std::vector<int32_t>& prompt : prompts_) {
      requests.push_back(Request(prompt, kNewTokens));
    }
  }
  const std::vector<Generated> got = GenerateAtOnce((*cluster)->stub(), requests);
  int answered[2] = {0, 0};
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_TRUE(got[r].status.ok()) << got[r].status.error_message();
    const int version = VersionOf(r % prompts_.size(), got[r].tokens);
    ASSERT_GE(version, 0) << "request " << r << " is neither version's answer";
    ++answered[version];
  }
  EXPECT_GT(answered[0], 0);
  EXPECT_GT(answered[1], 0);
  // No pair of two versions was ever tried: its bundle would have been refused.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*cluster)->decode(i).Metric("yoco_decode_transfer_failures_refused_total"), 0);
  }
}

TEST_F(ClusterRolloutTest, ReplacingEveryWorkerUnderLoadFailsNothing) {
  ClusterOptions options;
  options.prefill_workers = 2;
  options.decode_workers = 2;
  auto started = ServingCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  ServingCluster& cluster = **started;

  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::vector<std::string> failures;
  int answered[2] = {0, 0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&, c] {
      for (size_t n = c; !stop; ++n) {
        const size_t i = n % prompts_.size();
        v1::GenerateRequest request = Request(prompts_[i], kNewTokens);
        request.set_request_id(absl::StrCat("rollout-", c, "-", n));
        const Generated got = Generate(cluster.stub(), request);
        absl::MutexLock lock(&mu);
        if (!got.status.ok()) {
          failures.push_back(absl::StrCat(request.request_id(), ": ", got.status.error_message()));
        } else if (const int version = VersionOf(i, got.tokens); version < 0) {
          failures.push_back(absl::StrCat("prompt ", i, ": tokens of neither version"));
        } else {
          ++answered[version];
        }
      }
    });
  }
  auto served = [&] {
    absl::MutexLock lock(&mu);
    return answered[0] + answered[1];
  };
  // Old and new overlap at every step: a version always has a prefill and a decode worker.
  for (Service* worker :
       {&cluster.prefill(0), &cluster.decode(0), &cluster.prefill(1), &cluster.decode(1)}) {
    const int before = served();
    ASSERT_TRUE(worker->Replace({"--model", new_model_}).ok()) << cluster.Logs();
    ASSERT_TRUE(WaitFor([&] { return served() >= before + 10; }, absl::Seconds(60)))
        << cluster.Logs();
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  absl::MutexLock lock(&mu);
  if (!failures.empty()) {
    // The router's access log says which workers each failed request tried.
    std::string lines;
    for (absl::string_view line : absl::StrSplit(cluster.router().process().Log(), '\n')) {
      if (absl::StrContains(line, "outcome=") && !absl::StrContains(line, "outcome=ok")) {
        absl::StrAppend(&lines, line, "\n");
      }
    }
    ADD_FAILURE() << failures.size() << " failed, the first: " << failures[0] << "\n"
                  << lines << cluster.Logs();
  }
  EXPECT_GT(answered[0], 0);
  EXPECT_GT(answered[1], 0);
  // Once every worker runs the new model, only its answers come.
  const Generated last = cluster.Generate(Request(prompts_[0], kNewTokens));
  ASSERT_TRUE(last.status.ok());
  EXPECT_EQ(VersionOf(0, last.tokens), 1);
}

TEST(ClusterVocabularyTest, AWorkerOfAnotherVocabularyIsNotUsed) {
  const std::string dir = MakeTestDir();
  // Every byte and two merges: a vocabulary of the tiny model's size, not the router's bytes.
  std::string ranks;
  std::vector<std::string> tokens;
  for (int b = 255; b >= 0; --b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.push_back("ab");
  tokens.push_back("the");
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::StrAppend(&ranks, absl::Base64Escape(tokens[i]), " ", i, "\n");
  }
  std::ofstream(dir + "/small.tiktoken") << ranks;
  ClusterOptions options;
  options.decode_workers = 2;
  options.decode_flags_each = {{}, {"--tiktoken-ranks", dir + "/small.tiktoken"}};
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<v1::GenerateRequest> requests;
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 8; ++i) {
    const std::vector<int32_t> prompt = RandomPrompt(200 + i, i % 2 == 0 ? 200 : 24);
    requests.push_back(Request(prompt, kNewTokens));
    expected.push_back(InProcessTokens(prompt, kNewTokens));
  }
  const std::vector<Generated> got = GenerateAtOnce((*cluster)->stub(), requests);
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_TRUE(got[r].status.ok()) << got[r].status.error_message();
    EXPECT_EQ(got[r].tokens, expected[r]) << "request " << r;
  }
  EXPECT_GT((*cluster)->decode(0).Metric("yoco_decode_steps_total"), 0);
  EXPECT_EQ((*cluster)->decode(1).Metric("yoco_decode_steps_total"), 0);
  std::stringstream router_log;
  router_log << std::ifstream((*cluster)->dir() + "/router").rdbuf();
  EXPECT_TRUE(absl::StrContains(router_log.str(), "worker unusable"));
  EXPECT_TRUE(absl::StrContains(router_log.str(), "give both the same --tiktoken-ranks"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace yoco::testing
