// gnuplot script and data for the latency plot, written next to the PNG and removed after.
#include "loadtest/latency_plot.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/plot/gnuplot.h"

namespace yoco {
namespace {

// Sorted values with their cumulative fraction: a CDF gnuplot draws as lines.
void WriteCdf(std::vector<double> values, const std::string& path) {
  std::sort(values.begin(), values.end());
  std::ofstream out(path);
  for (size_t i = 0; i < values.size(); ++i) {
    out << values[i] << " " << static_cast<double>(i + 1) / static_cast<double>(values.size())
        << "\n";
  }
  if (values.empty()) out << "0 0\n";
}

void WriteValues(const std::vector<double>& values, const std::string& path) {
  std::ofstream out(path);
  for (double v : values) out << v << "\n";
  if (values.empty()) out << "NaN\n";
}

}  // namespace

absl::Status WriteLatencyPlot(const std::vector<RequestRecord>& records, const std::string& title,
                              const std::string& png_path) {
  std::vector<double> hit, miss, ttft, tpot, e2e;
  for (const RequestRecord& r : records) {
    if (!r.ok() || r.ttft_ms < 0) continue;
    (r.cached_tokens > 0 ? hit : miss).push_back(r.ttft_ms);
    ttft.push_back(r.ttft_ms);
    if (r.tpot_ms() >= 0) tpot.push_back(r.tpot_ms());
    e2e.push_back(r.e2e_ms);
  }
  double longest = 1;
  for (double v : ttft) longest = std::max(longest, v);
  const double bin = longest / 40;
  const std::string dir = PlotDataDir(png_path);
  WriteValues(hit, dir + "/hit.dat");
  WriteValues(miss, dir + "/miss.dat");
  WriteCdf(ttft, dir + "/ttft.cdf");
  WriteCdf(tpot, dir + "/tpot.cdf");
  WriteCdf(e2e, dir + "/e2e.cdf");
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 1400,520 font ',11'\n", "set output '", png_path, "'\n",
      "set multiplot layout 1,2 title '", absl::StrReplaceAll(title, {{"'", ""}}), "'\n",
      "bin(x) = ", bin, " * floor(x / ", bin, ")\n",
      "set title 'time to first token: prefix-cache hits and misses'\n",
      "set xlabel 'TTFT (ms)'\nset ylabel 'requests'\nset style fill transparent solid 0.5\n",
      "set boxwidth ", bin, "\n", "plot '", dir,
      "/hit.dat' using (bin($1)):(1) smooth freq with boxes title 'hits (", hit.size(), ")', '",
      dir, "/miss.dat' using (bin($1)):(1) smooth freq with boxes title 'misses (", miss.size(),
      ")'\n",
      "set title 'latency distributions'\nset xlabel 'ms (log scale)'\nset ylabel 'fraction of "
      "requests'\n",
      "set logscale x\nset key bottom right\nset yrange [0:1]\n", "plot '", dir,
      "/ttft.cdf' with lines lw 2 title 'TTFT', '", dir,
      "/tpot.cdf' with lines lw 2 title 'time per output token', '", dir,
      "/e2e.cdf' with lines lw 2 title 'end to end'\n", "unset multiplot\n");
  return RunGnuplot(script, dir);
}

absl::Status WriteSweepPlot(const std::vector<SweepPoint>& points, double slo_ttft_ms,
                            double slo_tpot_ms, const std::string& title,
                            const std::string& png_path) {
  const std::string dir = PlotDataDir(png_path);
  {
    std::ofstream out(dir + "/sweep.dat");
    for (const SweepPoint& p : points) {
      out << p.offered_rate << " " << p.requests_per_s << " " << p.goodput_requests_per_s << " "
          << std::max(p.ttft_p50_ms, 1e-3) << " " << std::max(p.ttft_p99_ms, 1e-3) << " "
          << std::max(p.tpot_p99_ms, 1e-3) << "\n";
    }
  }
  std::string limits;
  if (slo_ttft_ms > 0)
    absl::StrAppend(&limits, ", ", slo_ttft_ms, " with lines dt 2 title 'TTFT SLO'");
  if (slo_tpot_ms > 0)
    absl::StrAppend(&limits, ", ", slo_tpot_ms, " with lines dt 3 title 'TPOT SLO'");
  const std::string data = dir + "/sweep.dat";
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 1400,520 font ',11'\n", "set output '", png_path, "'\n",
      "set multiplot layout 1,2 title '", absl::StrReplaceAll(title, {{"'", ""}}), "'\n",
      "set xlabel 'offered load (requests/s)'\nset key top left\n",
      "set title 'latency against offered load'\nset ylabel 'ms (log scale)'\nset logscale y\n",
      "plot '", data, "' using 1:4 with linespoints lw 2 title 'TTFT p50', '", data,
      "' using 1:5 with linespoints lw 2 title 'TTFT p99', '", data,
      "' using 1:6 with linespoints lw 2 title 'TPOT p99'", limits, "\n",
      "unset logscale y\nset title 'throughput against offered load'\n",
      "set ylabel 'requests/s'\n", "plot '", data,
      "' using 1:2 with linespoints lw 2 title 'completed', '", data,
      "' using 1:3 with linespoints lw 2 title 'goodput (within the SLO)', x with lines dt 2 "
      "title 'offered'\n",
      "unset multiplot\n");
  return RunGnuplot(script, dir);
}

}  // namespace yoco
