// Workload generators: reproducible from the seed, the sizes asked for, Zipf popularity.
#include "loadtest/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "lib/files/temp_folder.h"

namespace yoco {
namespace {

WorkloadOptions Rag() {
  WorkloadOptions o;
  o.kind = WorkloadKind::kRag;
  o.seed = 11;
  o.vocab_size = 300;
  o.documents = 4;
  o.document_tokens = 200;
  o.question_tokens = 16;
  o.output_tokens = 8;
  return o;
}

TEST(WorkloadTest, RequestsArePureFunctionsOfSeedAndIndex) {
  auto a = Workload::Make(Rag());
  auto b = Workload::Make(Rag());
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint64_t i : {0, 1, 7, 1000}) {
    EXPECT_EQ(a->Request(i).prompt, b->Request(i).prompt);
  }
  // Asked out of order, the same.
  const auto late = a->Request(1000).prompt;
  for (uint64_t i = 0; i < 5; ++i) a->Request(i);
  EXPECT_EQ(a->Request(1000).prompt, late);
  WorkloadOptions other = Rag();
  other.seed = 12;
  auto c = Workload::Make(other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->documents()[0], c->documents()[0]);
}

TEST(WorkloadTest, RagPromptsAreADocumentThenAQuestion) {
  auto w = Workload::Make(Rag());
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->documents().size(), 4u);
  for (const auto& doc : w->documents()) {
    ASSERT_EQ(doc.size(), 200u);
    EXPECT_EQ(doc[0], 0);  // BOS
    for (size_t i = 1; i < doc.size(); ++i) {
      EXPECT_GE(doc[i], 4);
      EXPECT_LT(doc[i], 300);
    }
  }
  for (uint64_t i = 0; i < 50; ++i) {
    PlannedRequest r = w->Request(i);
    ASSERT_GE(r.document, 0);
    ASSERT_EQ(r.prompt.size(), 216u);
    const auto& doc = w->documents()[static_cast<size_t>(r.document)];
    EXPECT_TRUE(std::equal(doc.begin(), doc.end(), r.prompt.begin()));
    EXPECT_EQ(r.max_tokens, 8u);
  }
}

TEST(WorkloadTest, RagPopularityFollowsZipf) {
  WorkloadOptions o = Rag();
  o.zipf_exponent = 1.0;
  auto w = Workload::Make(o);
  ASSERT_TRUE(w.ok());
  std::map<int, int> counts;
  const int n = 20000;
  for (uint64_t i = 0; i < n; ++i) ++counts[w->Request(i).document];
  // Weights 1, 1/2, 1/3, 1/4 over their sum 25/12.
  const double sum = 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4;
  for (int k = 0; k < 4; ++k) {
    const double want = n * (1.0 / (k + 1)) / sum;
    EXPECT_NEAR(counts[k], want, 5 * std::sqrt(want)) << "document " << k;
  }
}

TEST(WorkloadTest, UnseenDocumentsAreFreshAndCounted) {
  WorkloadOptions o = Rag();
  o.unseen_fraction = 0.25;
  auto w = Workload::Make(o);
  ASSERT_TRUE(w.ok());
  int unseen = 0;
  const int n = 4000;
  for (uint64_t i = 0; i < n; ++i) {
    PlannedRequest r = w->Request(i);
    if (r.document < 0) {
      ++unseen;
      ASSERT_EQ(r.prompt.size(), 216u);
      for (const auto& doc : w->documents()) {
        EXPECT_FALSE(std::equal(doc.begin(), doc.end(), r.prompt.begin()));
      }
    }
  }
  EXPECT_NEAR(unseen, n * 0.25, 5 * std::sqrt(n * 0.25 * 0.75));
}

TEST(WorkloadTest, SharedPrefixAndRandomLengths) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kSharedPrefix;
  o.vocab_size = 1000;
  o.prefix_tokens = 100;
  o.suffix_tokens = 20;
  auto w = Workload::Make(o);
  ASSERT_TRUE(w.ok());
  const auto first = w->Request(0).prompt, second = w->Request(1).prompt;
  ASSERT_EQ(first.size(), 120u);
  EXPECT_TRUE(std::equal(first.begin(), first.begin() + 100, second.begin()));
  EXPECT_NE(first, second);

  o.kind = WorkloadKind::kRandom;
  o.input_tokens = 50;
  o.input_spread = 10;
  auto r = Workload::Make(o);
  ASSERT_TRUE(r.ok());
  size_t shortest = 1000, longest = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const size_t n = r->Request(i).prompt.size();
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  EXPECT_EQ(shortest, 40u);
  EXPECT_EQ(longest, 60u);
}

TEST(WorkloadTest, ChatTurnsRepeatTheConversationAndItsAnswers) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kChat;
  o.vocab_size = 300;
  o.turns = 3;
  o.system_tokens = 50;
  o.user_tokens = 10;
  auto w = Workload::Make(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->turns(), 3);
  const PlannedRequest first = w->Request(0), other = w->Request(3);  // two sessions
  ASSERT_EQ(first.prompt.size(), 60u);
  EXPECT_TRUE(std::equal(first.prompt.begin(), first.prompt.begin() + 50, other.prompt.begin()));
  EXPECT_NE(first.prompt, other.prompt);
  const std::vector<int32_t> answer = {7, 8, 9};
  const PlannedRequest second = w->NextTurn(first.prompt, answer, 1);
  ASSERT_EQ(second.prompt.size(), 73u);
  EXPECT_TRUE(std::equal(first.prompt.begin(), first.prompt.end(), second.prompt.begin()));
  EXPECT_TRUE(std::equal(answer.begin(), answer.end(), second.prompt.begin() + 60));
  EXPECT_EQ(w->NextTurn(first.prompt, answer, 1).prompt, second.prompt);  // reproducible
}

TEST(WorkloadTest, ReplayReadsRequestsInArrivalOrderAndNamesBadLines) {
  auto folder = TempFolder::Create("yoco-workload-test");
  ASSERT_TRUE(folder.ok()) << folder.status();
  const std::string path = folder->path() + "/replay.jsonl";
  auto write = [&](const std::string& text) {
    FILE* f = fopen(path.c_str(), "w");
    fputs(text.c_str(), f);
    fclose(f);
  };
  write(
      "{\"timestamp_ms\": 200, \"prompt\": \"hello\", \"max_tokens\": 5}\n\n"
      "{\"timestamp_ms\": 0, \"prompt_tokens\": [0, 9, 10]}\n");
  WorkloadOptions o;
  o.kind = WorkloadKind::kReplay;
  o.vocab_size = 300;
  o.output_tokens = 7;
  o.replay_path = path;
  auto w = Workload::Make(o);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->replay_size(), 2u);
  EXPECT_DOUBLE_EQ(w->ArrivalSeconds(0), 0);
  EXPECT_EQ(w->Request(0).prompt, (std::vector<int32_t>{0, 9, 10}));
  EXPECT_EQ(w->Request(0).max_tokens, 7u);  // the default
  EXPECT_DOUBLE_EQ(w->ArrivalSeconds(1), 0.2);
  EXPECT_EQ(w->Request(1).text, "hello");
  EXPECT_EQ(w->Request(1).max_tokens, 5u);
  for (const std::string& bad :
       {std::string("{\"prompt\": \"x\"}\n{\"prompt_tokens\": [0, 300]}\n"),
        std::string("{\"prompt\": \"x\"}\nnot json\n"),
        std::string("{\"prompt\": \"x\"}\n{\"prompt\": \"x\", \"prompt_tokens\": [1]}\n"),
        std::string("{\"prompt\": \"x\"}\n{\"prompt\": \"x\", \"timestamp_ms\": -1}\n"),
        std::string("{\"prompt\": \"x\"}\n{\"prompt\": \"x\", \"max_tokens\": 0}\n")}) {
    write(bad);
    auto r = Workload::Make(o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status();
  }
  o.replay_path = ::testing::TempDir() + "/no-such.jsonl";
  EXPECT_FALSE(Workload::Make(o).ok());
}

TEST(WorkloadTest, NonsenseSizesAreRefusedByName) {
  WorkloadOptions o = Rag();
  o.documents = 0;
  EXPECT_NE(Workload::Make(o).status().message().find("--documents"), std::string::npos);
  o = Rag();
  o.unseen_fraction = 1.5;
  EXPECT_NE(Workload::Make(o).status().message().find("--unseen-fraction"), std::string::npos);
  o.kind = WorkloadKind::kRandom;
  o.unseen_fraction = 0;
  o.input_tokens = 10;
  o.input_spread = 10;
  EXPECT_NE(Workload::Make(o).status().message().find("--input-spread"), std::string::npos);
  EXPECT_FALSE(ParseWorkloadKind("chaos").ok());
}

}  // namespace
}  // namespace yoco
