// The load signals autoscalers and load-aware routers read from a worker: requests waiting,
// requests running and state-memory utilisation (0-1). Exported under our names, and optionally
// also under vLLM's (vllm:num_requests_waiting, vllm:num_requests_running,
// vllm:kv_cache_usage_perc), so dashboards, KEDA triggers and the Gateway API Inference
// Extension's endpoint picker written for vLLM read a YOCO worker unchanged.
#ifndef YOCO_LIB_METRICS_LOAD_SIGNALS_EXPORT_H_
#define YOCO_LIB_METRICS_LOAD_SIGNALS_EXPORT_H_

#include <functional>

#include "lib/metrics/metrics_server.h"

namespace yoco {

struct LoadSignals {
  std::function<double()> requests_waiting;
  std::function<double()> requests_running;
  std::function<double()> state_memory_utilization;  // 0-1
};

// Adds yoco_worker_requests_waiting, yoco_worker_requests_running and
// yoco_worker_state_memory_utilization; with `vllm_names`, the vLLM-named copies too.
void ExportLoadSignals(const LoadSignals& signals, bool vllm_names, ScrapeCallbacks* callbacks);

}  // namespace yoco

#endif  // YOCO_LIB_METRICS_LOAD_SIGNALS_EXPORT_H_
