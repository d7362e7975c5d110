// Prometheus endpoint on prometheus-cpp's Exposer (civetweb), which reports bind failures by
// throwing: caught here and turned into a status.
#include "lib/metrics/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace yoco {
namespace {

class CallbackCollectable : public prometheus::Collectable {
 public:
  explicit CallbackCollectable(std::shared_ptr<ScrapeCallbacks> callbacks)
      : callbacks_(std::move(callbacks)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return callbacks_->Collect(); }

 private:
  std::shared_ptr<ScrapeCallbacks> callbacks_;
};

}  // namespace

void ScrapeCallbacks::Add(std::string name, std::string help, Type type,
                          std::function<double()> read) {
  entries_.push_back({std::move(name), std::move(help), type, std::move(read)});
}

std::vector<prometheus::MetricFamily> ScrapeCallbacks::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  for (const Entry& e : entries_) {
    prometheus::MetricFamily family;
    family.name = e.name;
    family.help = e.help;
    prometheus::ClientMetric metric;
    if (e.type == Type::kGauge) {
      family.type = prometheus::MetricType::Gauge;
      metric.gauge.value = e.read();
    } else {
      family.type = prometheus::MetricType::Counter;
      metric.counter.value = e.read();
    }
    family.metric.push_back(metric);
    families.push_back(std::move(family));
  }
  return families;
}

class MetricsServer::Impl {
 public:
  std::unique_ptr<prometheus::Exposer> exposer;
  std::shared_ptr<prometheus::Registry> registry;
  std::shared_ptr<CallbackCollectable> callbacks;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const {
  if (!impl_->exposer) return 0;
  const std::vector<int> ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry,
    std::shared_ptr<ScrapeCallbacks> callbacks) {
  auto impl = std::make_unique<Impl>();
  impl->registry = std::move(registry);
  impl->callbacks = std::make_shared<CallbackCollectable>(std::move(callbacks));
  if (!listen.empty()) {
    try {
      impl->exposer = std::make_unique<prometheus::Exposer>(listen);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
    }
    impl->exposer->RegisterCollectable(impl->registry);
    impl->exposer->RegisterCollectable(impl->callbacks);
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace yoco
