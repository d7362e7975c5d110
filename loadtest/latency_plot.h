// A run's latencies as a PNG (gnuplot): the TTFT histogram of prefix-cache hits against misses,
// and the distributions (CDF) of TTFT, time per output token and end-to-end latency.
#ifndef YOCO_LOADTEST_LATENCY_PLOT_H_
#define YOCO_LOADTEST_LATENCY_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadtest/request_record.h"

namespace yoco {

// UNAVAILABLE when gnuplot is missing or fails (the message says which).
absl::Status WriteLatencyPlot(const std::vector<RequestRecord>& records, const std::string& title,
                              const std::string& png_path);

// A sweep against offered load (one point per step): TTFT p50/p99 and TPOT p99 on the left,
// achieved throughput and goodput on the right, the SLO's limits drawn across.
struct SweepPoint {
  double offered_rate = 0;
  double requests_per_s = 0, goodput_requests_per_s = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p99_ms = 0;
};
absl::Status WriteSweepPlot(const std::vector<SweepPoint>& points, double slo_ttft_ms,
                            double slo_tpot_ms, const std::string& title,
                            const std::string& png_path);

}  // namespace yoco

#endif  // YOCO_LOADTEST_LATENCY_PLOT_H_
