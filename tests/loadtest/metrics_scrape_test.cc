// Prometheus text parsing and the before/after difference.
#include "loadtest/metrics_scrape.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

TEST(MetricsScrapeTest, ParsesSeriesWithLabelsAndSkipsComments) {
  auto m = ParsePrometheusText(
      "# HELP a_total things\n# TYPE a_total counter\na_total 3\n"
      "b{outcome=\"ok\",x=\"a b\"} 2.5\nc 1e3 1700000000\n\nbroken\n");
  EXPECT_EQ(m.size(), 3u);
  EXPECT_DOUBLE_EQ(m["a_total"], 3);
  EXPECT_DOUBLE_EQ(m["b{outcome=\"ok\",x=\"a b\"}"], 2.5);
  EXPECT_DOUBLE_EQ(m["c"], 1000);
}

TEST(MetricsScrapeTest, ChangedSeriesAreTheDifference) {
  auto d = ChangedSeries({{"a", 1}, {"b", 5}}, {{"a", 4}, {"b", 5}, {"c", 2}});
  EXPECT_EQ(d.size(), 2u);
  EXPECT_DOUBLE_EQ(d["a"], 3);
  EXPECT_DOUBLE_EQ(d["c"], 2);
}

TEST(MetricsScrapeTest, UnreachableOrMalformedUrlsAreErrors) {
  EXPECT_EQ(HttpGet("https://x:1/metrics").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpGet("http://127.0.0.1/metrics").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpGet("http://127.0.0.1:1/metrics").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace yoco
