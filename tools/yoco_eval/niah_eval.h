// Needle in a haystack through the served stack: a grid of document lengths x needle depths,
// N questions per cell, each a document with one fact (the needle) among distractor facts and
// filler, asked greedily through the router; accuracy is exact answer match. The cases are a
// pure function of the seed, so two runs (uncached, pre-cached, with a worker killed) ask the
// same questions and can be compared answer for answer.
#ifndef YOCO_TOOLS_YOCO_EVAL_NIAH_EVAL_H_
#define YOCO_TOOLS_YOCO_EVAL_NIAH_EVAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/yoco_eval/docqa_task.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {

struct NiahOptions {
  std::vector<int> lengths = {256, 1024, 4096};    // document bytes
  std::vector<int> depths = {0, 25, 50, 75, 100};  // needle position, percent of the document
  int questions = 10;                              // per cell
  uint64_t seed = 0;
  bool precache = false;  // pre-cache each document before asking about it
  int concurrency = 4;    // questions in flight
  int max_new_tokens = 16;
  double timeout_seconds = 120;  // per request
  // Prompts share cached prefixes only under the same salt: a fresh salt makes a run uncached
  // even where an earlier run left snapshots of the same documents.
  std::string cache_salt;
};

struct NiahCase {
  int length = 0, depth = 0;
  DocQaFact needle;
  std::string document, question;  // the prompt is document + question
};

struct NiahAnswer {
  std::string text;  // what the model said, whitespace trimmed
  bool correct = false;
  double ttft_ms = -1;
  uint32_t prompt_tokens = 0, cached_prompt_tokens = 0;
  std::string error;  // the gRPC status of a failed request ("" when it succeeded)
};

// Cells in order (length-major), `questions` cases each; case i of a cell depends only on
// (seed, length, depth, i).
std::vector<NiahCase> MakeNiahCases(const DocQaTask& task, const NiahOptions& options);

// One case through the router: Precache (when asked), then a greedy Generate of the prompt that
// stops at the end of the answer line.
NiahAnswer AskRouter(v1::Yoco::StubInterface& stub, const NiahCase& c, const NiahOptions& options);

// Every case, `options.concurrency` at a time; answers[i] is cases[i]'s. `progress` (if set)
// is called after each answer with the number done.
std::vector<NiahAnswer> RunNiah(v1::Yoco::StubInterface& stub, const std::vector<NiahCase>& cases,
                                const NiahOptions& options,
                                const std::function<void(size_t)>& progress = nullptr);

// The report: options, `cells` (length, depth, n, accuracy, answers), `overall_accuracy`,
// `errors`, and TTFT of hits and misses per length.
nlohmann::json NiahReport(const std::vector<NiahCase>& cases,
                          const std::vector<NiahAnswer>& answers, const NiahOptions& options);

// Accuracy as a table: a row per depth, a column per length.
std::string NiahTable(const nlohmann::json& report);

// The accuracy grid as a heat map PNG (gnuplot). UNAVAILABLE when gnuplot fails.
absl::Status WriteNiahHeatmap(const nlohmann::json& report, const std::string& title,
                              const std::string& png_path);

// Two reports of the same cases, answer for answer: "" when every answer is the same, else a
// description of the first differences. INVALID_ARGUMENT when they are not the same cases.
absl::StatusOr<std::string> CompareNiahReports(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace yoco

#endif  // YOCO_TOOLS_YOCO_EVAL_NIAH_EVAL_H_
