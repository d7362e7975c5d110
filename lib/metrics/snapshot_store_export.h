// Exposes a prefix cache's SnapshotStoreStats as Prometheus metrics read at scrape time.
#ifndef YOCO_LIB_METRICS_SNAPSHOT_STORE_EXPORT_H_
#define YOCO_LIB_METRICS_SNAPSHOT_STORE_EXPORT_H_

#include <string>

#include "lib/cache/snapshot_store.h"
#include "lib/metrics/metrics_server.h"

namespace yoco {

// Adds PREFIX_* metrics; `store` must outlive the callbacks' use.
void ExportSnapshotStoreMetrics(const std::string& prefix, SnapshotStore* store,
                                ScrapeCallbacks* callbacks);

}  // namespace yoco

#endif  // YOCO_LIB_METRICS_SNAPSHOT_STORE_EXPORT_H_
