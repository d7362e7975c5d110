// Exposes a transport's TransferMetrics as Prometheus counters read at scrape time.
#ifndef YOCO_LIB_METRICS_TRANSFER_METRICS_EXPORT_H_
#define YOCO_LIB_METRICS_TRANSFER_METRICS_EXPORT_H_

#include <string>

#include "lib/metrics/metrics_server.h"
#include "lib/transport/transfer_metrics.h"

namespace yoco {

// Adds PREFIX_transfer_* metrics; `metrics` must outlive the callbacks' use.
void ExportTransferMetrics(const std::string& prefix, const TransferMetrics* metrics,
                           ScrapeCallbacks* callbacks);

}  // namespace yoco

#endif  // YOCO_LIB_METRICS_TRANSFER_METRICS_EXPORT_H_
