// The needle-in-a-haystack documents: length bounds, one needle where asked, no conflicting
// statement of the needle's fact, the same document for the same seed, and refusals of broken
// task files.
#include "tools/yoco_eval/docqa_task.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace yoco {
namespace {

// Sentences end with '.', and names never hold one.
std::vector<std::string> Sentences(const std::string& document) {
  std::vector<std::string> out;
  for (absl::string_view s : absl::StrSplit(document, ". ")) out.emplace_back(s);
  return out;
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(DocQaTaskTest, DocumentsFitTheirLengthAndHoldTheNeedleOnceAtItsDepth) {
  const DocQaTask task = DocQaTask::Default();
  for (int length : {64, 256, 1024, 4096}) {
    for (int depth : {0, 50, 100}) {
      for (uint64_t seed = 0; seed < 20; ++seed) {
        SplitMix64 rng(seed * 1000 + static_cast<uint64_t>(length + depth));
        const DocQaFact needle = task.RandomFact(rng);
        const std::string doc = task.Document(rng, length, needle, depth / 100.0);
        ASSERT_LE(doc.size(), static_cast<size_t>(std::max<int>(length, 80))) << doc;
        if (length >= 256) {
          ASSERT_GE(doc.size(), static_cast<size_t>(length) - 80) << doc;
        }
        const std::vector<std::string> sentences = Sentences(doc);
        int at = -1;
        for (size_t i = 0; i < sentences.size(); ++i) {
          // The needle's value next to its name, in any template.
          const std::string& s = sentences[i];
          if (absl::StrContains(s, needle.name) && absl::StrContains(s, needle.value)) {
            // A distractor about the same person states another relation only.
            if (at == -1) at = static_cast<int>(i);
          }
        }
        ASSERT_NE(at, -1) << doc;
        const int last = static_cast<int>(sentences.size()) - 1;
        if (depth == 0) {
          EXPECT_EQ(at, 0) << doc;
        } else if (depth == 100) {
          EXPECT_EQ(at, last) << doc;
        } else if (depth == 50) {
          EXPECT_NEAR(at, last / 2.0, 1.0) << doc;
        }
        EXPECT_EQ(Count(doc, task.Question(needle)), 0);
      }
    }
  }
}

TEST(DocQaTaskTest, NoOtherSentenceStatesTheNeedlesRelationForItsName) {
  const DocQaTask task = DocQaTask::Default();
  // Age and code questions are about numbers: a second number next to the name would make the
  // answer ambiguous, so count the relation's question words per sentence instead.
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SplitMix64 rng(seed);
    DocQaFact needle = task.RandomFact(rng);
    needle.relation = "code";
    needle.value = "1234";
    const std::string doc = task.Document(rng, 1024, needle, 0.5);
    int codes_of_name = 0;
    for (const std::string& s : Sentences(doc)) {
      codes_of_name += absl::StrContains(s, needle.name) && absl::StrContains(s, "code");
    }
    ASSERT_EQ(codes_of_name, 1) << doc;
  }
}

TEST(DocQaTaskTest, EveryFactReportedIsStatedInTheDocumentOnce) {
  const DocQaTask task = DocQaTask::Default();
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SplitMix64 rng(seed);
    const DocQaFact needle = task.RandomFact(rng);
    std::vector<DocQaFact> facts;
    const std::string doc = task.Document(rng, 700, needle, 0.5, &facts);
    ASSERT_GE(facts.size(), 2u);
    int records = 0;
    for (const std::string& s : Sentences(doc)) {
      int stating = 0;
      for (const DocQaFact& f : facts) {
        stating += absl::StrContains(s, f.name) && absl::StrContains(s, f.value);
      }
      EXPECT_LE(stating, 1) << s;
      records += stating;
    }
    // Each fact in its own sentence (a value may recur inside another, e.g. age 48 in code
    // 4821, so count sentences stating some fact rather than matching facts one to one).
    EXPECT_EQ(records, static_cast<int>(facts.size())) << doc;
  }
}

TEST(DocQaTaskTest, TheSameSeedGivesTheSameDocument) {
  const DocQaTask task = DocQaTask::Default();
  SplitMix64 a(42), b(42), c(43);
  const DocQaFact fa = task.RandomFact(a), fb = task.RandomFact(b), fc = task.RandomFact(c);
  EXPECT_EQ(task.Document(a, 512, fa, 0.3), task.Document(b, 512, fb, 0.3));
  EXPECT_NE(task.Document(a, 512, fa, 0.3), task.Document(c, 512, fc, 0.3));
}

TEST(DocQaTaskTest, QuestionsEndWithTheAnswerCue) {
  const DocQaTask task = DocQaTask::Default();
  const std::string q = task.Question({"city", "Alice Adler", "Oslo"});
  EXPECT_EQ(q, "\nQ: Where does Alice Adler live?\nA:");
}

class TaskFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  // Per test and process: CTest runs this suite's tests in parallel, and one's TearDown must not
  // remove the file another is reading.
  std::string path_ = ::testing::TempDir() + "/docqa_task_test_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                      std::to_string(getpid()) + ".json";
};

TEST_F(TaskFileTest, BrokenFilesAreRefusedWithTheReason) {
  auto expect_refused = [&](const std::string& text, const std::string& reason) {
    auto t = DocQaTask::Load(Write(text));
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(t.status().message(), reason)) << t.status();
  };
  expect_refused("[]", "must be a JSON object");
  expect_refused("{", "");
  expect_refused(R"({"first_names": []})", "'first_names' must be a non-empty list");
  expect_refused(R"({"first_names": ["A"], "last_names": [3]})", "'last_names' must hold");
  // A complete file, then one broken template.
  std::ifstream in(std::string(YOCO_SOURCE_DIR) + "/models/yoco-docqa-tiny/docqa_task.json");
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(DocQaTask::Load(Write(good)).ok());
  std::string broken = good;
  broken.replace(broken.find("The code of {name} is {value}."), 30, "The code of {name} is known.");
  expect_refused(broken, "lacks {name} or {value}");
  std::string no_question = good;
  no_question.replace(no_question.find("\"question_format\": \"\\nQ: {question}\\nA:\""), 40,
                      "\"question_format\": \"\\nQ: \\nA:\"");
  expect_refused(no_question, "'question_format' lacks {question}");
}

TEST_F(TaskFileTest, SpecialAndMissingFilesAreRefused) {
  EXPECT_FALSE(DocQaTask::Load("/nonexistent/task.json").ok());
  EXPECT_FALSE(DocQaTask::Load("/dev/zero").ok());  // not a regular file: never read forever
  const std::string fifo = ::testing::TempDir() + "/docqa_task_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(DocQaTask::Load(fifo).ok());  // and no hang
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace yoco
