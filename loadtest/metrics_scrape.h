// Scraping a service's Prometheus /metrics before and after a run, so the report shows what the
// servers themselves counted (requests, cache hits, retries, tokens) next to what the client saw.
#ifndef YOCO_LOADTEST_METRICS_SCRAPE_H_
#define YOCO_LOADTEST_METRICS_SCRAPE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace yoco {

// Series ("name{labels}") -> value, from Prometheus text format; comments skipped.
std::map<std::string, double> ParsePrometheusText(absl::string_view text);

// GET http://HOST:PORT/PATH (plain HTTP, a few seconds at most). UNAVAILABLE on failure.
absl::StatusOr<std::string> HttpGet(const std::string& url);

// after - before for every series whose value changed (counters, histogram buckets, gauges).
std::map<std::string, double> ChangedSeries(const std::map<std::string, double>& before,
                                            const std::map<std::string, double>& after);

}  // namespace yoco

#endif  // YOCO_LOADTEST_METRICS_SCRAPE_H_
