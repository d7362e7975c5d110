// MetricsServer: the Prometheus /metrics endpoint every service exposes. Values come from a
// prometheus::Registry (counters, histograms the service updates) and from callbacks read at
// scrape time (gauges and counters that already live elsewhere, e.g. batcher and transport
// statistics), so no thread copies numbers around.
#ifndef YOCO_LIB_METRICS_METRICS_SERVER_H_
#define YOCO_LIB_METRICS_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace yoco {

// Values read when Prometheus scrapes.
class ScrapeCallbacks {
 public:
  enum class Type { kGauge, kCounter };
  void Add(std::string name, std::string help, Type type, std::function<double()> read);

  // For MetricsServer.
  std::vector<prometheus::MetricFamily> Collect() const;

 private:
  struct Entry {
    std::string name, help;
    Type type;
    std::function<double()> read;
  };
  std::vector<Entry> entries_;
};

class MetricsServer {
 public:
  // Serves `registry` and `callbacks` at http://LISTEN/metrics (port 0 picks one). An empty
  // `listen` serves nothing.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Registry> registry,
      std::shared_ptr<ScrapeCallbacks> callbacks);
  ~MetricsServer();

  // The port bound; 0 when nothing is served.
  int port() const;

 private:
  class Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace yoco

#endif  // YOCO_LIB_METRICS_METRICS_SERVER_H_
