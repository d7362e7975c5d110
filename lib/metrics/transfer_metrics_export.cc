// TransferMetrics export.
#include "lib/metrics/transfer_metrics_export.h"

namespace yoco {

void ExportTransferMetrics(const std::string& prefix, const TransferMetrics* m,
                           ScrapeCallbacks* callbacks) {
  using Type = ScrapeCallbacks::Type;
  auto add = [&](const char* name, const char* help, const std::atomic<uint64_t>* value) {
    callbacks->Add(prefix + name, help, Type::kCounter,
                   [value] { return static_cast<double>(value->load()); });
  };
  add("_transfer_bytes_sent_total", "State bundle bytes sent and acknowledged", &m->bytes_sent);
  add("_transfers_sent_total", "State bundles sent and acknowledged", &m->transfers_sent);
  add("_transfer_bytes_received_total", "State bundle bytes received and verified",
      &m->bytes_received);
  add("_transfers_received_total", "State bundles received and verified", &m->transfers_received);
  add("_transfer_failures_deadline_total", "Transfers that missed their deadline",
      &m->failed_deadline);
  add("_transfer_failures_cancelled_total", "Transfers cancelled by either side",
      &m->failed_cancelled);
  add("_transfer_failures_peer_total", "Transfers lost to an unreachable or dead peer",
      &m->failed_peer);
  add("_transfer_failures_refused_total", "Transfers the receiver refused", &m->failed_refused);
  add("_transfer_latency_microseconds_total", "Sum of send-to-acknowledgement latencies",
      &m->latency_us_total);
}

}  // namespace yoco
