// yoco_worker_backend_info: which backend a worker runs the model on, as a Prometheus info
// metric (value 1, the facts in labels), so dashboards can split latency by CPU and GPU workers.
#ifndef YOCO_LIB_METRICS_BACKEND_INFO_EXPORT_H_
#define YOCO_LIB_METRICS_BACKEND_INFO_EXPORT_H_

#include <string>

#include "prometheus/registry.h"

namespace yoco {

// backend: "cpu" or "cuda"; device: "cpu (2 threads)" or the GPU's name (DescribeBackend).
void ExportBackendInfo(prometheus::Registry& registry, const std::string& backend,
                       const std::string& device);

}  // namespace yoco

#endif  // YOCO_LIB_METRICS_BACKEND_INFO_EXPORT_H_
