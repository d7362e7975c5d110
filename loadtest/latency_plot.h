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

}  // namespace yoco

#endif  // YOCO_LOADTEST_LATENCY_PLOT_H_
