// Needle-in-a-haystack cases, their run through the router, and the report.
#include "tools/yoco_eval/niah_eval.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/plot/gnuplot.h"

namespace yoco {
namespace {

// A case's own generator: independent of the grid's shape and of every other case.
uint64_t CaseSeed(uint64_t seed, int length, int depth, int index) {
  uint64_t s = seed;
  for (uint64_t part : {static_cast<uint64_t>(length), static_cast<uint64_t>(depth),
                        static_cast<uint64_t>(index)}) {
    SplitMix64 mix(s ^ (part * 0x9E3779B97F4A7C15ull));
    s = mix.Next();
  }
  return s;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return -1;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

std::vector<NiahCase> MakeNiahCases(const DocQaTask& task, const NiahOptions& options) {
  std::vector<NiahCase> cases;
  for (int length : options.lengths) {
    for (int depth : options.depths) {
      for (int i = 0; i < options.questions; ++i) {
        SplitMix64 rng(CaseSeed(options.seed, length, depth, i));
        NiahCase c;
        c.length = length;
        c.depth = depth;
        c.needle = task.RandomFact(rng);
        c.document = task.Document(rng, length, c.needle, depth / 100.0);
        c.question = task.Question(c.needle);
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

NiahAnswer AskRouter(v1::Yoco::StubInterface& stub, const NiahCase& c, const NiahOptions& options) {
  NiahAnswer answer;
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1e3));
  if (options.precache) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    v1::PrecacheRequest request;
    request.set_text(c.document);
    request.set_ttl_seconds(3600);
    request.set_cache_salt(options.cache_salt);
    v1::PrecacheResponse response;
    const grpc::Status st = stub.Precache(&context, request, &response);
    if (!st.ok()) {
      answer.error = absl::StrCat("Precache: ", st.error_code(), " ", st.error_message());
      return answer;
    }
  }
  grpc::ClientContext context;
  context.set_deadline(deadline);
  v1::GenerateRequest request;
  request.set_text(c.document + c.question);
  request.set_cache_salt(options.cache_salt);
  v1::SamplingParams* sampling = request.mutable_sampling();
  sampling->set_temperature(0);
  sampling->set_max_new_tokens(static_cast<uint32_t>(options.max_new_tokens));
  const std::string end_of_line = "\n";
  sampling->add_stop_strings(end_of_line);  // the answer is one line
  sampling->set_stop_at_eos(true);
  auto stream = stub.Generate(&context, request);
  v1::GenerateResponse response;
  std::string text;
  while (stream->Read(&response)) {
    if (response.has_token()) text += response.token().text();
    if (response.has_finish()) {
      answer.ttft_ms = response.finish().timings().ttft_ms();
      answer.prompt_tokens = response.finish().usage().prompt_tokens();
      answer.cached_prompt_tokens = response.finish().usage().cached_prompt_tokens();
    }
  }
  const grpc::Status st = stream->Finish();
  if (!st.ok()) {
    answer.error = absl::StrCat("Generate: ", st.error_code(), " ", st.error_message());
    return answer;
  }
  answer.text = std::string(absl::StripAsciiWhitespace(text));
  answer.correct = answer.text == c.needle.value;
  return answer;
}

std::vector<NiahAnswer> RunNiah(v1::Yoco::StubInterface& stub, const std::vector<NiahCase>& cases,
                                const NiahOptions& options,
                                const std::function<void(size_t)>& progress) {
  std::vector<NiahAnswer> answers(cases.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mu;
  std::vector<std::thread> workers;
  const int n = std::max(1, std::min<int>(options.concurrency, static_cast<int>(cases.size())));
  for (int w = 0; w < n; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < cases.size(); i = next++) {
        answers[i] = AskRouter(stub, cases[i], options);
        const size_t d = ++done;
        if (progress) {
          std::lock_guard<std::mutex> lock(progress_mu);
          progress(d);
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return answers;
}

nlohmann::json NiahReport(const std::vector<NiahCase>& cases,
                          const std::vector<NiahAnswer>& answers, const NiahOptions& options) {
  nlohmann::json report;
  report["seed"] = options.seed;
  report["lengths"] = options.lengths;
  report["depths"] = options.depths;
  report["questions"] = options.questions;
  report["precache"] = options.precache;
  report["cells"] = nlohmann::json::array();
  size_t correct = 0, errors = 0;
  for (size_t i = 0; i < cases.size();) {
    nlohmann::json cell;
    cell["length"] = cases[i].length;
    cell["depth"] = cases[i].depth;
    cell["answers"] = nlohmann::json::array();
    size_t n = 0, right = 0;
    for (; i < cases.size() && cases[i].length == cell["length"] && cases[i].depth == cell["depth"];
         ++i, ++n) {
      const NiahAnswer& a = answers[i];
      right += a.correct;
      errors += !a.error.empty();
      nlohmann::json entry = {
          {"question", cases[i].question.substr(cases[i].question.find("Q: ") + 3)},
          {"expected", cases[i].needle.value},
          {"answer", a.text},
          {"correct", a.correct},
          {"document_bytes", cases[i].document.size()},
          {"prompt_tokens", a.prompt_tokens},
          {"cached_prompt_tokens", a.cached_prompt_tokens},
          {"ttft_ms", a.ttft_ms}};
      // The question ends "\nA:"; keep only its own words.
      std::string& q = entry["question"].get_ref<std::string&>();
      q = q.substr(0, q.find('\n'));
      if (!a.error.empty()) entry["error"] = a.error;
      cell["answers"].push_back(std::move(entry));
    }
    cell["n"] = n;
    cell["accuracy"] = n == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(n);
    correct += right;
    report["cells"].push_back(std::move(cell));
  }
  report["overall_accuracy"] =
      cases.empty() ? 0.0 : static_cast<double>(correct) / static_cast<double>(cases.size());
  report["errors"] = errors;
  nlohmann::json ttft = nlohmann::json::array();
  for (int length : options.lengths) {
    std::vector<double> hit, miss;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].length != length || !answers[i].error.empty()) continue;
      (answers[i].cached_prompt_tokens > 0 ? hit : miss).push_back(answers[i].ttft_ms);
    }
    ttft.push_back({{"length", length},
                    {"hits", hit.size()},
                    {"hit_ttft_ms_mean", Mean(hit)},
                    {"hit_ttft_ms_p50", Median(hit)},
                    {"misses", miss.size()},
                    {"miss_ttft_ms_mean", Mean(miss)},
                    {"miss_ttft_ms_p50", Median(miss)}});
  }
  report["ttft_by_length"] = std::move(ttft);
  return report;
}

std::string NiahTable(const nlohmann::json& report) {
  std::string out = absl::StrFormat("%-10s", "depth");
  for (const auto& length : report["lengths"]) {
    absl::StrAppend(&out, absl::StrFormat(" %9s", absl::StrCat(length.get<int>(), " B")));
  }
  absl::StrAppend(&out, "\n");
  for (const auto& depth : report["depths"]) {
    absl::StrAppend(&out, absl::StrFormat("%-10s", absl::StrCat(depth.get<int>(), "%")));
    for (const auto& length : report["lengths"]) {
      for (const auto& cell : report["cells"]) {
        if (cell["length"] == length && cell["depth"] == depth) {
          absl::StrAppend(&out, absl::StrFormat(" %8.0f%%", 100 * cell["accuracy"].get<double>()));
        }
      }
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("overall accuracy %.1f%%, %d errors\n",
                                        100 * report["overall_accuracy"].get<double>(),
                                        report["errors"].get<int>()));
  return out;
}

absl::Status WriteNiahHeatmap(const nlohmann::json& report, const std::string& title,
                              const std::string& png_path) {
  const std::string dir = PlotDataDir(png_path);
  const auto& lengths = report["lengths"];
  const auto& depths = report["depths"];
  {
    std::ofstream out(dir + "/cells.dat");
    for (const auto& cell : report["cells"]) {
      size_t x = 0, y = 0;
      while (x < lengths.size() && lengths[x] != cell["length"]) ++x;
      while (y < depths.size() && depths[y] != cell["depth"]) ++y;
      out << x << " " << y << " " << 100 * cell["accuracy"].get<double>() << "\n";
    }
  }
  std::string xtics, ytics;
  for (size_t i = 0; i < lengths.size(); ++i) {
    absl::StrAppend(&xtics, i ? ", " : "", "\"", lengths[i].get<int>(), "\" ", i);
  }
  for (size_t i = 0; i < depths.size(); ++i) {
    // Tic labels are formats to gnuplot: "%%" is a percent sign.
    absl::StrAppend(&ytics, i ? ", " : "", "\"", depths[i].get<int>(), "%%\" ", i);
  }
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 800,560 noenhanced\n"  // plain text: titles hold underscores
      "set output '",
      png_path, "'\n", "set title \"", title, "\"\n",
      "set xlabel 'document length (bytes)'\nset ylabel 'needle depth'\n", "set xtics (", xtics,
      ")\nset ytics (", ytics, ")\n", "set xrange [-0.5:", lengths.size() - 0.5, "]\n",
      "set yrange [", depths.size() - 0.5, ":-0.5]\n",  // the shallowest needle on top
      "set cbrange [0:100]\nset cblabel 'accuracy (%)'\n",
      "set palette defined (0 '#b2182b', 50 '#f7f7f7', 100 '#2166ac')\n",
      // Boxes rather than `with image`, which needs at least a 2 x 2 grid.
      "plot '", dir, "/cells.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid ",
      "lc palette notitle, \\\n", "     '", dir,
      "/cells.dat' using 1:2:(sprintf('%.0f', $3)) with labels notitle\n");
  return RunGnuplot(script, dir);
}

absl::StatusOr<std::string> CompareNiahReports(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.contains("cells") || !b.contains("cells") || a["seed"] != b["seed"] ||
      a["cells"].size() != b["cells"].size()) {
    return absl::InvalidArgumentError("the reports are not of the same cases (seed or grid)");
  }
  std::string diff;
  int differing = 0;
  for (size_t c = 0; c < a["cells"].size(); ++c) {
    const auto& ca = a["cells"][c];
    const auto& cb = b["cells"][c];
    if (ca["length"] != cb["length"] || ca["depth"] != cb["depth"] ||
        ca["answers"].size() != cb["answers"].size()) {
      return absl::InvalidArgumentError("the reports are not of the same cases (grid)");
    }
    for (size_t i = 0; i < ca["answers"].size(); ++i) {
      const auto& x = ca["answers"][i];
      const auto& y = cb["answers"][i];
      if (x["question"] != y["question"] || x["expected"] != y["expected"]) {
        return absl::InvalidArgumentError("the reports are not of the same cases (questions)");
      }
      if (x["answer"] != y["answer"]) {
        if (++differing <= 5) {
          absl::StrAppend(&diff, "length ", ca["length"].get<int>(), " depth ",
                          ca["depth"].get<int>(), " #", i, ": \"", x["answer"].get<std::string>(),
                          "\" vs \"", y["answer"].get<std::string>(), "\"\n");
        }
      }
    }
  }
  if (differing > 5) absl::StrAppend(&diff, "... ", differing, " answers differ in all\n");
  return diff;
}

}  // namespace yoco
