// RouterMetrics: the router's Prometheus metrics (requests by outcome, latency histograms,
// retries, prefix-cache hits, background cache work).
#ifndef YOCO_SERVICES_ROUTER_ROUTER_METRICS_H_
#define YOCO_SERVICES_ROUTER_ROUTER_METRICS_H_

#include <grpcpp/grpcpp.h>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace yoco {

// A request's outcome as the metrics' label and the access log name it: "ok", "cancelled", ...
const char* OutcomeName(grpc::StatusCode code);

// The router's Prometheus metrics.
struct RouterMetrics {
  explicit RouterMetrics(prometheus::Registry& registry);
  prometheus::Counter& Outcome(grpc::StatusCode code);

  prometheus::Family<prometheus::Counter>& requests;  // by outcome
  prometheus::Histogram& time_to_first_token;         // seconds
  prometheus::Histogram& inter_token;                 // seconds between streamed tokens
  prometheus::Counter& generated_tokens;
  prometheus::Counter& retries;          // worker pairs retried after a failure
  prometheus::Counter& local_prefills;   // attempts prefilled on the decode worker
  prometheus::Counter& load_waits;       // requests that waited at the router for room
  prometheus::Counter& stalled_streams;  // decode streams moved off a worker that stalled
  // Workers marked failed after a call to them failed (never for the client's own deadline or
  // cancellation, nor for a refusal for load), by role.
  prometheus::Family<prometheus::Counter>& worker_failures;
  prometheus::Counter& prefill_worker_failures;
  prometheus::Counter& decode_worker_failures;
  prometheus::Counter& cache_hits;            // requests that resumed from a snapshot
  prometheus::Counter& cached_prompt_tokens;  // prompt tokens not prefilled thanks to the cache
  prometheus::Counter& conversation_snapshots_dropped;
  prometheus::Counter& snapshot_copies;  // snapshots copied to a less loaded prefill worker
  // Under --tenants, by tenant (names come only from the tenant file: a bounded label set).
  prometheus::Family<prometheus::Counter>& tenant_requests;
  prometheus::Family<prometheus::Counter>& tenant_prompt_tokens;
  prometheus::Family<prometheus::Counter>& tenant_generated_tokens;
  // Requests refused by a tenant's limits, by tenant and limit (the tenant file's names).
  prometheus::Family<prometheus::Counter>& tenant_limit_refusals;
  prometheus::Counter& unauthenticated;  // calls refused: no or unknown credentials
  prometheus::Family<prometheus::Counter>& http_responses;  // the HTTP front's, by status
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ROUTER_METRICS_H_
