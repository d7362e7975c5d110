// Metric names and buckets.
#include "services/router/router_metrics.h"

namespace yoco {

RouterMetrics::RouterMetrics(prometheus::Registry& registry)
    : requests(prometheus::BuildCounter()
                   .Name("yoco_router_requests_total")
                   .Help("Generate requests by outcome")
                   .Register(registry)),
      time_to_first_token(
          prometheus::BuildHistogram()
              .Name("yoco_router_time_to_first_token_seconds")
              .Help("Time from request to the first streamed token")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                               0.5, 1, 2.5, 5, 10})),
      inter_token(
          prometheus::BuildHistogram()
              .Name("yoco_router_inter_token_seconds")
              .Help("Time between consecutive streamed tokens")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025,
                                                               0.05, 0.1, 0.25, 0.5, 1})),
      generated_tokens(prometheus::BuildCounter()
                           .Name("yoco_router_generated_tokens_total")
                           .Help("Tokens streamed to clients")
                           .Register(registry)
                           .Add({})),
      retries(prometheus::BuildCounter()
                  .Name("yoco_router_retries_total")
                  .Help("Requests continued on another worker pair after a failure")
                  .Register(registry)
                  .Add({})),
      local_prefills(prometheus::BuildCounter()
                         .Name("yoco_router_local_prefills_total")
                         .Help("Request attempts prefilled on their decode worker (short, "
                               "uncached prompts)")
                         .Register(registry)
                         .Add({})),
      load_waits(prometheus::BuildCounter()
                     .Name("yoco_router_load_waits_total")
                     .Help("Requests every worker refused for load that waited at the router "
                           "for room")
                     .Register(registry)
                     .Add({})),
      stalled_streams(prometheus::BuildCounter()
                          .Name("yoco_router_stalled_streams_total")
                          .Help("Decode streams moved to another pair because their worker "
                                "failed its health probe or stopped sending tokens")
                          .Register(registry)
                          .Add({})),
      worker_failures(prometheus::BuildCounter()
                          .Name("yoco_router_worker_failures_total")
                          .Help("Workers marked failed after a call to them failed")
                          .Register(registry)),
      prefill_worker_failures(worker_failures.Add({{"role", "prefill"}})),
      decode_worker_failures(worker_failures.Add({{"role", "decode"}})),
      cache_hits(prometheus::BuildCounter()
                     .Name("yoco_router_cache_hits_total")
                     .Help("Requests whose prefill resumed from a prefix-cache snapshot")
                     .Register(registry)
                     .Add({})),
      cached_prompt_tokens(prometheus::BuildCounter()
                               .Name("yoco_router_cached_prompt_tokens_total")
                               .Help("Prompt tokens restored from prefix-cache snapshots")
                               .Register(registry)
                               .Add({})),
      conversation_snapshots_dropped(
          prometheus::BuildCounter()
              .Name("yoco_router_conversation_snapshots_dropped_total")
              .Help("Conversation snapshots not made because the background queue was full")
              .Register(registry)
              .Add({})),
      snapshot_copies(prometheus::BuildCounter()
                          .Name("yoco_router_snapshot_copies_total")
                          .Help("Snapshots copied to a less loaded prefill worker")
                          .Register(registry)
                          .Add({})),
      tenant_requests(prometheus::BuildCounter()
                          .Name("yoco_router_tenant_requests_total")
                          .Help("Generate requests by tenant (--tenants)")
                          .Register(registry)),
      tenant_prompt_tokens(prometheus::BuildCounter()
                               .Name("yoco_router_tenant_prompt_tokens_total")
                               .Help("Prompt tokens of finished requests by tenant (--tenants)")
                               .Register(registry)),
      tenant_generated_tokens(prometheus::BuildCounter()
                                  .Name("yoco_router_tenant_generated_tokens_total")
                                  .Help("Tokens streamed by tenant (--tenants)")
                                  .Register(registry)),
      tenant_limit_refusals(
          prometheus::BuildCounter()
              .Name("yoco_router_tenant_limit_refusals_total")
              .Help("Requests refused by their tenant's limits, by tenant and limit (--tenants)")
              .Register(registry)),
      unauthenticated(prometheus::BuildCounter()
                          .Name("yoco_router_unauthenticated_total")
                          .Help("Calls refused under --tenants: no credentials or unknown ones")
                          .Register(registry)
                          .Add({})),
      http_responses(prometheus::BuildCounter()
                         .Name("yoco_router_http_responses_total")
                         .Help("Responses of the OpenAI HTTP front (--http-listen) by status")
                         .Register(registry)) {}

const char* OutcomeName(grpc::StatusCode code) {
  return code == grpc::StatusCode::OK                   ? "ok"
         : code == grpc::StatusCode::INVALID_ARGUMENT   ? "invalid_argument"
         : code == grpc::StatusCode::RESOURCE_EXHAUSTED ? "resource_exhausted"
         : code == grpc::StatusCode::CANCELLED          ? "cancelled"
         : code == grpc::StatusCode::DEADLINE_EXCEEDED  ? "deadline_exceeded"
         : code == grpc::StatusCode::UNAVAILABLE        ? "unavailable"
         : code == grpc::StatusCode::UNAUTHENTICATED    ? "unauthenticated"
                                                        : "error";
}

prometheus::Counter& RouterMetrics::Outcome(grpc::StatusCode code) {
  return requests.Add({{"outcome", OutcomeName(code)}});
}

}  // namespace yoco
