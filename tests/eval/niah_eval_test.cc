// The needle-in-a-haystack grid and report: cases are a pure function of (seed, cell, index),
// accuracy is counted per cell, and two reports compare answer for answer.
#include "tools/yoco_eval/niah_eval.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace yoco {
namespace {

NiahOptions SmallGrid() {
  NiahOptions o;
  o.lengths = {256, 512};
  o.depths = {0, 100};
  o.questions = 3;
  o.seed = 9;
  return o;
}

TEST(NiahEvalTest, CasesCoverTheGridAndDependOnlyOnSeedCellAndIndex) {
  const DocQaTask task = DocQaTask::Default();
  const std::vector<NiahCase> cases = MakeNiahCases(task, SmallGrid());
  ASSERT_EQ(cases.size(), 2u * 2u * 3u);
  EXPECT_EQ(cases[0].length, 256);
  EXPECT_EQ(cases[0].depth, 0);
  EXPECT_EQ(cases.back().length, 512);
  EXPECT_EQ(cases.back().depth, 100);
  for (const NiahCase& c : cases) {
    EXPECT_TRUE(absl::StrContains(c.document, c.needle.name)) << c.document;
    EXPECT_LE(c.document.size(), static_cast<size_t>(c.length));
  }
  // A smaller grid holds the same cases for the cells it shares.
  NiahOptions one = SmallGrid();
  one.lengths = {512};
  one.depths = {100};
  const std::vector<NiahCase> same = MakeNiahCases(task, one);
  ASSERT_EQ(same.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(same[i].document, cases[9 + i].document);
    EXPECT_EQ(same[i].question, cases[9 + i].question);
  }
  // Another seed, other documents.
  one.seed = 10;
  EXPECT_NE(MakeNiahCases(task, one)[0].document, same[0].document);
  // Within a cell, the questions differ.
  EXPECT_NE(cases[0].document, cases[1].document);
}

std::vector<NiahAnswer> Answers(const std::vector<NiahCase>& cases, int wrong_every) {
  std::vector<NiahAnswer> out;
  for (size_t i = 0; i < cases.size(); ++i) {
    NiahAnswer a;
    const bool wrong = wrong_every > 0 && i % static_cast<size_t>(wrong_every) == 0;
    a.text = wrong ? "nobody" : cases[i].needle.value;
    a.correct = !wrong;
    a.ttft_ms = 10.0 + static_cast<double>(i);
    a.cached_prompt_tokens = i % 2 ? 128 : 0;
    out.push_back(a);
  }
  return out;
}

TEST(NiahEvalTest, ReportCountsAccuracyPerCellAndTtftByHitAndMiss) {
  const NiahOptions o = SmallGrid();
  const std::vector<NiahCase> cases = MakeNiahCases(DocQaTask::Default(), o);
  std::vector<NiahAnswer> answers = Answers(cases, 3);  // cases 0, 3, 6, 9 wrong
  answers[4].error = "Generate: 14 worker gone";
  answers[4].correct = false;
  const nlohmann::json r = NiahReport(cases, answers, o);
  ASSERT_EQ(r["cells"].size(), 4u);
  for (const auto& cell : r["cells"]) {
    EXPECT_EQ(cell["n"], 3);
    EXPECT_EQ(cell["answers"].size(), 3u);
  }
  EXPECT_NEAR(r["cells"][0]["accuracy"].get<double>(), 2.0 / 3, 1e-12);  // 0 wrong
  EXPECT_NEAR(r["cells"][1]["accuracy"].get<double>(), 1.0 / 3, 1e-12);  // 3 wrong, 4 failed
  EXPECT_NEAR(r["overall_accuracy"].get<double>(), 7.0 / 12, 1e-12);
  EXPECT_EQ(r["errors"], 1);
  EXPECT_EQ(r["cells"][1]["answers"][1]["error"], "Generate: 14 worker gone");
  EXPECT_EQ(r["cells"][0]["answers"][0]["expected"], cases[0].needle.value);
  EXPECT_FALSE(absl::StrContains(r["cells"][0]["answers"][0]["question"].get<std::string>(), "\n"));
  // Length 256 holds cases 0..5: odd ones hit (TTFT 11, 13, 15), even ones miss (10, 12), the
  // failed case 4 counts in neither.
  const auto& t = r["ttft_by_length"][0];
  EXPECT_EQ(t["hits"], 3);
  EXPECT_EQ(t["misses"], 2);
  EXPECT_DOUBLE_EQ(t["hit_ttft_ms_mean"].get<double>(), 13.0);
  EXPECT_DOUBLE_EQ(t["miss_ttft_ms_mean"].get<double>(), 11.0);
  const std::string table = NiahTable(r);
  EXPECT_TRUE(absl::StrContains(table, "256 B")) << table;
  EXPECT_TRUE(absl::StrContains(table, "67%")) << table;
  EXPECT_TRUE(absl::StrContains(table, "overall accuracy 58.3%, 1 errors")) << table;
}

TEST(NiahEvalTest, CompareFindsEveryDifferentAnswerAndRefusesOtherCases) {
  const NiahOptions o = SmallGrid();
  const std::vector<NiahCase> cases = MakeNiahCases(DocQaTask::Default(), o);
  const nlohmann::json a = NiahReport(cases, Answers(cases, 0), o);
  auto same = CompareNiahReports(a, a);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, "");
  const nlohmann::json b = NiahReport(cases, Answers(cases, 5), o);  // 0, 5 and 10 differ
  auto diff = CompareNiahReports(a, b);
  ASSERT_TRUE(diff.ok());
  EXPECT_EQ(std::count(diff->begin(), diff->end(), '\n'), 3) << *diff;
  EXPECT_TRUE(absl::StrContains(*diff, "\"nobody\"")) << *diff;
  NiahOptions other = o;
  other.seed = 10;
  const nlohmann::json c =
      NiahReport(MakeNiahCases(DocQaTask::Default(), other), Answers(cases, 0), other);
  EXPECT_EQ(CompareNiahReports(a, c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareNiahReports(a, nlohmann::json::object()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace yoco
