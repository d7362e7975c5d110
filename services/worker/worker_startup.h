// What yoco-prefill and yoco-decode share around their own wiring: the flags both take (model,
// weights, K/V dtype, bundle transport, backend, metrics, drain), the start-up checks in the
// order a misconfiguration should surface, and serving until SIGTERM.
#ifndef YOCO_SERVICES_WORKER_WORKER_STARTUP_H_
#define YOCO_SERVICES_WORKER_WORKER_STARTUP_H_

#include <functional>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "lib/auth/caller_allow_list.h"
#include "lib/engine/backend_choice.h"
#include "lib/engine/model.h"
#include "lib/grammar/structured_output.h"
#include "lib/metrics/metrics_server.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

struct WorkerBase {
  CallerAllowList callers;
  std::shared_ptr<const Model> model;
  UcxTransportOptions transport;
  BackendChoice backend;  // kind, threads and device from the flags; the role sets the rest
  // Structured output over the tokenizer's vocabulary (--tiktoken-ranks, as the router's).
  std::shared_ptr<const StructuredOutput> structured_output;
};

// Reads the common flags: who may call (first, so a deployment that leaves the API open fails
// before the model loads), the model, the transport, the backend. On a bad flag logs why and
// exits with 2, on anything else that fails with 1: it runs first in main, before anything needs
// cleaning up.
WorkerBase WorkerBaseFromFlagsOrExit();

// --vllm-metric-names.
bool VllmMetricNames();

// Serves `service` on `listen` until SIGTERM/SIGINT, then drains for --drain-seconds: the
// /metrics endpoint (`callbacks` plus the draining gauge and the backend's info), TLS from the
// flags, readiness from `ready`. Logs "serving on port N" (and "metrics on port N") once
// listening. Returns main's exit code.
int ServeWorker(const std::string& listen, grpc::Service& service, const std::string& service_name,
                const std::string& backend_description, std::shared_ptr<ScrapeCallbacks> callbacks,
                std::function<bool()> ready);

}  // namespace yoco

#endif  // YOCO_SERVICES_WORKER_WORKER_STARTUP_H_
