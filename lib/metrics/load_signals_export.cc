// Load signals under our names and vLLM's.
#include "lib/metrics/load_signals_export.h"

#include <string>

namespace yoco {

void ExportLoadSignals(const LoadSignals& signals, bool vllm_names, ScrapeCallbacks* callbacks) {
  using Type = ScrapeCallbacks::Type;
  struct Signal {
    const char* ours;
    const char* vllm;
    const char* help;
    const std::function<double()>& read;
  };
  const Signal all[] = {
      {"yoco_worker_requests_waiting", "vllm:num_requests_waiting",
       "Requests accepted but waiting for the engine", signals.requests_waiting},
      {"yoco_worker_requests_running", "vllm:num_requests_running",
       "Requests the engine is working on", signals.requests_running},
      {"yoco_worker_state_memory_utilization", "vllm:kv_cache_usage_perc",
       "Fraction (0-1) of the state-memory budget in use", signals.state_memory_utilization},
  };
  for (const Signal& s : all) {
    callbacks->Add(s.ours, s.help, Type::kGauge, s.read);
    if (vllm_names)
      callbacks->Add(s.vllm, std::string(s.help) + " (vLLM name)", Type::kGauge, s.read);
  }
}

}  // namespace yoco
