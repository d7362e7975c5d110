// LoadSummary: a run's statistics from its request records — latency percentiles, throughput,
// goodput under an SLO, errors by code, prefix-cache effect — and the JSON summary built from
// them (the schema the README documents).
#ifndef YOCO_LOADTEST_LOAD_SUMMARY_H_
#define YOCO_LOADTEST_LOAD_SUMMARY_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "loadtest/request_record.h"
#include "nlohmann/json.hpp"

namespace yoco {

struct Percentiles {
  size_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

// Percentiles by linear interpolation between the two nearest ranks (NumPy's default); all
// zero for no values.
Percentiles Summarize(std::vector<double> values);
// The q-quantile (q in [0, 1]) of sorted values, interpolated as above.
double Quantile(const std::vector<double>& sorted, double q);

struct Slo {
  double ttft_ms = 0;  // 0: no bound
  double tpot_ms = 0;
  bool Met(const RequestRecord& r) const;
};

struct LoadSummary {
  size_t requests = 0;
  size_t ok = 0;
  std::map<std::string, size_t> errors;  // status code name -> count
  double duration_s = 0;
  Percentiles ttft_ms, itl_ms, tpot_ms, e2e_ms;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double goodput_requests_per_s = 0;  // successful requests that met the SLO
  double slo_attainment = 0;          // the fraction of all requests that met it
  double cache_hit_rate = 0;          // successful requests with cached prompt tokens
  double cached_token_fraction = 0;   // cached / prompt tokens of successful requests
  Percentiles ttft_hit_ms, ttft_miss_ms;
};

LoadSummary SummarizeRun(const std::vector<RequestRecord>& records, double duration_s,
                         const Slo& slo);

// A sweep step holds the SLO when no request failed and at least `attainment` of them met it.
bool HoldsSlo(const LoadSummary& step, double attainment);
nlohmann::json ToJson(const LoadSummary& summary);

}  // namespace yoco

#endif  // YOCO_LOADTEST_LOAD_SUMMARY_H_
