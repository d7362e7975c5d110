// yoco-eval: evaluations of a served model through the router's gRPC API.
//   yoco-eval niah --router HOST:PORT --seed S [--lengths ..] [--depths ..] [--questions N]
//                  [--precache] --json OUT.json [--heatmap OUT.png]
//   yoco-eval compare A.json B.json     (exit 0 when every answer is the same)
//   yoco-eval document --seed S [--length N] [--questions K]
// Flags, wiring, run; the task and the evaluation live beside it.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "lib/files/bounded_file.h"
#include "lib/model/strict_json.h"
#include "lib/rpc/service_flags.h"
#include "lib/rpc/tls_credentials.h"
#include "lib/rpc/tls_flags.h"
#include "tools/yoco_eval/docqa_task.h"
#include "tools/yoco_eval/niah_eval.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50051", "the router's gRPC address HOST:PORT");
ABSL_FLAG(uint64_t, seed, 0, "draws every document, needle and question");
ABSL_FLAG(std::string, lengths, "256,1024,4096", "document lengths in bytes");
ABSL_FLAG(std::string, depths, "0,25,50,75,100", "needle depths, percent of the document");
ABSL_FLAG(int, questions, 10, "niah: questions per (length, depth) cell; document: questions");
ABSL_FLAG(int, length, 600, "document: its length in bytes");
ABSL_FLAG(bool, precache, false, "pre-cache each document before asking about it");
ABSL_FLAG(int, concurrency, 4, "questions in flight");
ABSL_FLAG(std::string, task, "",
          "the task's word lists and templates (default: yoco-docqa-tiny's, built in)");
ABSL_FLAG(std::string, json, "", "write the report here (cells, answers, accuracy)");
ABSL_FLAG(std::string, heatmap, "", "draw the accuracy grid here (PNG, gnuplot)");
ABSL_FLAG(double, timeout_seconds, 120, "each request's deadline");
ABSL_FLAG(std::string, cache_salt, "",
          "every request's cache salt (a fresh one: no snapshot of an earlier run is used)");

namespace {

constexpr uint64_t kMaxReportBytes = 256 << 20;

absl::StatusOr<std::vector<int>> IntList(const std::string& flag, const std::string& text, int lo,
                                         int hi) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < lo || v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", part, "\" is not an integer from ", lo, " to ", hi));
    }
    out.push_back(v);
  }
  return out;
}

int Niah() {
  yoco::NiahOptions options;
  auto lengths = IntList("lengths", absl::GetFlag(FLAGS_lengths), 64, 1 << 20);
  auto depths = IntList("depths", absl::GetFlag(FLAGS_depths), 0, 100);
  for (const absl::Status& s : {lengths.status(), depths.status()}) {
    if (!s.ok()) {
      std::cerr << "yoco-eval: " << s.message() << "\n";
      return 2;
    }
  }
  options.lengths = *lengths;
  options.depths = *depths;
  options.questions = absl::GetFlag(FLAGS_questions);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.precache = absl::GetFlag(FLAGS_precache);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.timeout_seconds = absl::GetFlag(FLAGS_timeout_seconds);
  options.cache_salt = absl::GetFlag(FLAGS_cache_salt);
  if (options.questions < 1 || options.concurrency < 1 || options.timeout_seconds <= 0) {
    std::cerr << "yoco-eval: --questions, --concurrency and --timeout-seconds must be positive\n";
    return 2;
  }
  const std::string task_path = absl::GetFlag(FLAGS_task);
  auto task = task_path.empty() ? yoco::DocQaTask::Default() : yoco::DocQaTask::Load(task_path);
  if (!task.ok()) {
    std::cerr << "yoco-eval: --task: " << task.status().message() << "\n";
    return 2;
  }
  auto credentials = yoco::MakeChannelCredentials(yoco::TlsFilesFromFlags());
  if (!credentials.ok()) {
    std::cerr << "yoco-eval: " << credentials.status().message() << "\n";
    return 2;
  }
  auto stub =
      yoco::v1::Yoco::NewStub(grpc::CreateChannel(absl::GetFlag(FLAGS_router), *credentials));
  const std::vector<yoco::NiahCase> cases = yoco::MakeNiahCases(*task, options);
  const bool terminal = isatty(STDERR_FILENO);
  const auto answers = yoco::RunNiah(*stub, cases, options, [&](size_t done) {
    if (terminal) std::cerr << "\ryoco-eval: " << done << "/" << cases.size() << " answered";
  });
  if (terminal) std::cerr << "\n";
  const nlohmann::json report = yoco::NiahReport(cases, answers, options);
  std::cout << yoco::NiahTable(report);
  for (const auto& t : report["ttft_by_length"]) {
    std::cout << "length " << t["length"] << ": TTFT p50 " << t["miss_ttft_ms_p50"] << " ms ("
              << t["misses"] << " misses), " << t["hit_ttft_ms_p50"] << " ms (" << t["hits"]
              << " prefix-cache hits)\n";
  }
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream out(path);
    out << report.dump(1) << "\n";
    if (!out) {
      std::cerr << "yoco-eval: cannot write " << path << "\n";
      return 2;
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_heatmap); !path.empty()) {
    const absl::Status st =
        yoco::WriteNiahHeatmap(report,
                               absl::StrCat("needle in a haystack, seed ", options.seed,
                                            options.precache ? ", pre-cached" : ""),
                               path);
    if (!st.ok()) {
      std::cerr << "yoco-eval: " << st.message() << "\n";
      return 2;
    }
  }
  // Failed requests are not wrong answers: say so with the exit status.
  return report["errors"].get<int>() > 0 ? 3 : 0;
}

// A document and questions about it, as JSON: what scripts/run.sh's demo pre-caches and asks.
int Document() {
  const std::string task_path = absl::GetFlag(FLAGS_task);
  auto task = task_path.empty() ? yoco::DocQaTask::Default() : yoco::DocQaTask::Load(task_path);
  const int length = absl::GetFlag(FLAGS_length);
  if (!task.ok() || length < 64 || absl::GetFlag(FLAGS_questions) < 1) {
    std::cerr << "yoco-eval: "
              << (task.ok() ? "--length must be >= 64 and --questions >= 1"
                            : std::string(task.status().message()))
              << "\n";
    return 2;
  }
  yoco::SplitMix64 rng(absl::GetFlag(FLAGS_seed));
  const yoco::DocQaFact needle = task->RandomFact(rng);
  std::vector<yoco::DocQaFact> facts;
  nlohmann::json out;
  out["document"] = task->Document(rng, length, needle, rng.Uniform(), &facts);
  out["questions"] = nlohmann::json::array();
  for (int i = 0; i < absl::GetFlag(FLAGS_questions) && !facts.empty(); ++i) {
    const size_t pick = rng.Below(facts.size());
    const yoco::DocQaFact& f = facts[pick];
    out["questions"].push_back({{"prompt_suffix", task->Question(f)}, {"answer", f.value}});
    facts.erase(facts.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}

int Compare(const std::string& a_path, const std::string& b_path) {
  nlohmann::json reports[2];
  const std::string paths[2] = {a_path, b_path};
  for (int i = 0; i < 2; ++i) {
    auto text = yoco::ReadBoundedFile(paths[i], kMaxReportBytes);
    auto parsed = text.ok() ? yoco::ParseStrictJson(*text, yoco::JsonLimits{})
                            : absl::StatusOr<nlohmann::json>(text.status());
    if (!parsed.ok()) {
      std::cerr << "yoco-eval: " << paths[i] << ": " << parsed.status().message() << "\n";
      return 2;
    }
    reports[i] = *std::move(parsed);
  }
  auto diff = yoco::CompareNiahReports(reports[0], reports[1]);
  if (!diff.ok()) {
    std::cerr << "yoco-eval: " << diff.status().message() << "\n";
    return 2;
  }
  if (diff->empty()) {
    std::cout << "every answer is the same\n";
    return 0;
  }
  std::cout << *diff;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = yoco::ParseServiceFlags(
      argc, argv,
      "evaluations of a served model.\nusage: yoco-eval niah --router HOST:PORT --seed S "
      "[--lengths 256,1024,4096] [--depths 0,25,50,75,100] [--questions N] [--precache] "
      "--json OUT.json [--heatmap OUT.png]\n       yoco-eval compare A.json B.json\n"
      "       yoco-eval document --seed S [--length N] [--questions K]   (a document and "
      "questions about it, JSON)");
  if (args.size() == 2 && std::string(args[1]) == "niah") return Niah();
  if (args.size() == 2 && std::string(args[1]) == "document") return Document();
  if (args.size() == 4 && std::string(args[1]) == "compare") return Compare(args[2], args[3]);
  std::cerr << "usage: " << absl::ProgramUsageMessage() << "\n";
  return 2;
}
