// Run statistics.
#include "loadtest/load_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace yoco {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Percentiles Summarize(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.count = values.size();
  p.p50 = Quantile(values, 0.50);
  p.p90 = Quantile(values, 0.90);
  p.p99 = Quantile(values, 0.99);
  p.max = values.back();
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return p;
}

bool Slo::Met(const RequestRecord& r) const {
  if (!r.ok()) return false;
  if (ttft_ms > 0 && !(r.ttft_ms >= 0 && r.ttft_ms <= ttft_ms)) return false;
  if (tpot_ms > 0 && r.tpot_ms() > tpot_ms) return false;
  return true;
}

LoadSummary SummarizeRun(const std::vector<RequestRecord>& records, double duration_s,
                         const Slo& slo) {
  LoadSummary s;
  s.requests = records.size();
  s.duration_s = duration_s;
  std::vector<double> ttft, itl, tpot, e2e, ttft_hit, ttft_miss;
  size_t output_tokens = 0, good = 0, hits = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok()) {
      ++s.errors[r.status];
      continue;
    }
    ++s.ok;
    if (r.ttft_ms >= 0) {
      ttft.push_back(r.ttft_ms);
      (r.cached_tokens > 0 ? ttft_hit : ttft_miss).push_back(r.ttft_ms);
    }
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    if (r.tpot_ms() >= 0) tpot.push_back(r.tpot_ms());
    e2e.push_back(r.e2e_ms);
    output_tokens += r.output_tokens;
    prompt_tokens += r.prompt_tokens;
    cached_tokens += r.cached_tokens;
    if (r.cached_tokens > 0) ++hits;
    if (slo.Met(r)) ++good;
  }
  s.ttft_ms = Summarize(ttft);
  s.itl_ms = Summarize(itl);
  s.tpot_ms = Summarize(tpot);
  s.e2e_ms = Summarize(e2e);
  s.ttft_hit_ms = Summarize(ttft_hit);
  s.ttft_miss_ms = Summarize(ttft_miss);
  if (duration_s > 0) {
    s.requests_per_s = static_cast<double>(s.ok) / duration_s;
    s.output_tokens_per_s = static_cast<double>(output_tokens) / duration_s;
    s.goodput_requests_per_s = static_cast<double>(good) / duration_s;
  }
  if (s.requests > 0)
    s.slo_attainment = static_cast<double>(good) / static_cast<double>(s.requests);
  if (s.ok > 0) s.cache_hit_rate = static_cast<double>(hits) / static_cast<double>(s.ok);
  if (prompt_tokens > 0) {
    s.cached_token_fraction =
        static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens);
  }
  return s;
}

bool HoldsSlo(const LoadSummary& step, double attainment) {
  return step.requests > 0 && step.errors.empty() && step.slo_attainment >= attainment;
}

namespace {

nlohmann::json ToJson(const Percentiles& p) {
  return {{"count", p.count}, {"p50", p.p50}, {"p90", p.p90},
          {"p99", p.p99},     {"max", p.max}, {"mean", p.mean}};
}

}  // namespace

nlohmann::json ToJson(const LoadSummary& s) {
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [code, n] : s.errors) errors[code] = n;
  return {{"requests", s.requests},
          {"ok", s.ok},
          {"errors", errors},
          {"duration_s", s.duration_s},
          {"ttft_ms", ToJson(s.ttft_ms)},
          {"itl_ms", ToJson(s.itl_ms)},
          {"tpot_ms", ToJson(s.tpot_ms)},
          {"e2e_ms", ToJson(s.e2e_ms)},
          {"requests_per_s", s.requests_per_s},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"goodput_requests_per_s", s.goodput_requests_per_s},
          {"slo_attainment", s.slo_attainment},
          {"cache_hit_rate", s.cache_hit_rate},
          {"cached_token_fraction", s.cached_token_fraction},
          {"ttft_hit_ms", ToJson(s.ttft_hit_ms)},
          {"ttft_miss_ms", ToJson(s.ttft_miss_ms)}};
}

}  // namespace yoco
