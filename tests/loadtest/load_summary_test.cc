// Run statistics against numbers computed by hand.
#include "loadtest/load_summary.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

TEST(LoadSummaryTest, PercentilesInterpolateBetweenRanks) {
  // 1..10: rank q*(n-1); p50 = 5.5, p90 = 9.1, p99 = 9.91 (NumPy's default gives the same).
  Percentiles p = Summarize({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(p.count, 10u);
  EXPECT_DOUBLE_EQ(p.p50, 5.5);
  EXPECT_DOUBLE_EQ(p.p90, 9.1);
  EXPECT_DOUBLE_EQ(p.p99, 9.91);
  EXPECT_DOUBLE_EQ(p.max, 10);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
  Percentiles one = Summarize({42});
  EXPECT_DOUBLE_EQ(one.p50, 42);
  EXPECT_DOUBLE_EQ(one.p99, 42);
  EXPECT_EQ(Summarize({}).count, 0u);
}

RequestRecord Record(double ttft, double e2e, uint32_t tokens, uint32_t prompt, uint32_t cached) {
  RequestRecord r;
  r.ttft_ms = ttft;
  r.e2e_ms = e2e;
  r.output_tokens = tokens;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  for (uint32_t i = 1; i < tokens; ++i) r.itl_ms.push_back((e2e - ttft) / (tokens - 1));
  return r;
}

TEST(LoadSummaryTest, ThroughputGoodputErrorsAndCache) {
  std::vector<RequestRecord> records = {
      Record(100, 1000, 10, 500, 384),  // tpot 100
      Record(300, 1200, 10, 500, 0),    // tpot 100, TTFT over the SLO
      Record(50, 950, 4, 200, 128),     // tpot 300, over the SLO
      Record(80, 80, 1, 100, 0),        // one token: no tpot
  };
  RequestRecord failed;
  failed.status = "UNAVAILABLE";
  records.push_back(failed);
  records.push_back(failed);
  records.back().status = "DEADLINE_EXCEEDED";
  Slo slo;
  slo.ttft_ms = 200;
  slo.tpot_ms = 150;
  LoadSummary s = SummarizeRun(records, 2.0, slo);
  EXPECT_EQ(s.requests, 6u);
  EXPECT_EQ(s.ok, 4u);
  EXPECT_EQ(s.errors.at("UNAVAILABLE"), 1u);
  EXPECT_EQ(s.errors.at("DEADLINE_EXCEEDED"), 1u);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 2.0);              // 4 ok in 2 s
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 25.0 / 2.0);  // 10 + 10 + 4 + 1
  EXPECT_DOUBLE_EQ(s.goodput_requests_per_s, 1.0);      // the first and the last
  EXPECT_DOUBLE_EQ(s.cache_hit_rate, 0.5);
  EXPECT_DOUBLE_EQ(s.cached_token_fraction, 512.0 / 1300.0);
  EXPECT_EQ(s.tpot_ms.count, 3u);
  EXPECT_DOUBLE_EQ(s.tpot_ms.max, 300);
  EXPECT_EQ(s.itl_ms.count, 9u + 9u + 3u);
  EXPECT_EQ(s.ttft_hit_ms.count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_hit_ms.p50, 75);
  EXPECT_EQ(s.ttft_miss_ms.count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_miss_ms.max, 300);
  nlohmann::json j = ToJson(s);
  for (const char* key : {"requests", "errors", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms",
                          "requests_per_s", "output_tokens_per_s", "goodput_requests_per_s",
                          "cache_hit_rate", "cached_token_fraction"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"p50", "p90", "p99", "max"}) EXPECT_TRUE(j["ttft_ms"].contains(key));
}

TEST(LoadSummaryTest, ASweepStepHoldsTheSloOnlyWithoutErrorsAndEnoughAttainment) {
  Slo slo;
  slo.ttft_ms = 200;
  std::vector<RequestRecord> records;
  for (int i = 0; i < 10; ++i) records.push_back(Record(i < 9 ? 100 : 300, 500, 5, 10, 0));
  LoadSummary s = SummarizeRun(records, 1.0, slo);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 0.9);
  EXPECT_TRUE(HoldsSlo(s, 0.9));
  EXPECT_FALSE(HoldsSlo(s, 0.95));
  records.back().status = "UNAVAILABLE";  // a failure breaks it whatever the attainment
  EXPECT_FALSE(HoldsSlo(SummarizeRun(records, 1.0, slo), 0.5));
  EXPECT_FALSE(HoldsSlo(SummarizeRun({}, 1.0, slo), 0.5));
}

TEST(LoadSummaryTest, RecordTpotExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(Record(100, 1000, 10, 1, 0).tpot_ms(), 100);
  EXPECT_EQ(Record(100, 100, 1, 1, 0).tpot_ms(), -1);
  nlohmann::json j = Record(100, 100, 1, 1, 0).ToJson();
  EXPECT_TRUE(j["tpot_ms"].is_null());
}

// The router's timings go into the record's JSON line only when the router reported them.
TEST(LoadSummaryTest, RecordCarriesTheServersTimingsWhenReported) {
  RequestRecord r = Record(100, 1000, 10, 1, 0);
  EXPECT_FALSE(r.ToJson().contains("server"));
  r.server_ttft_ms = 90;
  r.prefill_ms = 60;
  r.transfer_ms = 5;
  const nlohmann::json j = r.ToJson();
  EXPECT_EQ(j["server"]["ttft_ms"], 90);
  EXPECT_EQ(j["server"]["prefill_ms"], 60);
  EXPECT_EQ(j["server"]["transfer_ms"], 5);
}

}  // namespace
}  // namespace yoco
