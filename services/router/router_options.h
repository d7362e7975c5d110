// RouterOptions: the router's settings (yoco-router's flags), read by RouterService and by each
// request's GenerateStream.
#ifndef YOCO_SERVICES_ROUTER_ROUTER_OPTIONS_H_
#define YOCO_SERVICES_ROUTER_ROUTER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "lib/auth/tenant_directory.h"
#include "lib/rpc/tls_credentials.h"

namespace yoco {

struct RouterOptions {
  // Each role's workers: HOST:PORT entries, or one dns:///NAME:PORT (DnsWorkerTarget) looked up
  // every `discovery_interval`, or one k8s://NAMESPACE/SELECTOR?port=N (KubernetesWorkerTarget)
  // watched through the Kubernetes API and read every `discovery_interval`.
  std::vector<std::string> prefill_workers;
  std::vector<std::string> decode_workers;
  absl::Duration discovery_interval = absl::Seconds(5);
  // k8s:// targets: the API server ("" = in-cluster), the service account's token and CA.
  std::string k8s_api_server;
  std::string k8s_token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string k8s_ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  int attempts = 3;  // worker pairs tried per request
  // The model's name to clients (OpenAI's `model`) and in traces (gen_ai.request.model).
  std::string model_name = "yoco";
  // One log line per finished Generate call: who, how much, how fast, how it ended, where.
  bool access_log = true;
  // A request that finds no healthy worker pair waits this long (within its deadline) for one,
  // since workers that are restarting (a rollout, a crash) come back within seconds.
  absl::Duration wait_for_workers = absl::Seconds(10);
  // A request that every worker refuses for load (their queues at their bound) waits at the
  // router for room (LoadWaitQueue: fair across tenants) for up to this long within its
  // deadline, with at most `max_waiting_requests` waiting; beyond either it fails with
  // RESOURCE_EXHAUSTED.
  absl::Duration max_load_wait = absl::Seconds(60);
  size_t max_waiting_requests = 1024;
  // A decode stream whose worker fails its health probe, or that gets no token for
  // `stall_multiple` times its average gap (at least `min_stall`), moves to another pair with
  // the tokens already sent (StallWatch).
  double stall_multiple = 50;
  absl::Duration min_stall = absl::Seconds(2);
  uint32_t default_max_new_tokens = 16;
  uint32_t transfer_timeout_ms = 30000;
  absl::Duration probe_interval = absl::Seconds(1);  // worker health and cache index refresh
  // What one request of load on a prefill worker costs against prompt tokens it has cached
  // (WorkerRegistry::Choose).
  int64_t cache_load_penalty_tokens = 1024;
  // After a request, extend its prefill worker's snapshot over the generated tokens (in the
  // background), so a follow-up turn that repeats the conversation prefills only what is new.
  bool snapshot_conversations = true;
  // Conditional disaggregation: a prompt (plus tokens already streamed, on a retry) of at most
  // this many tokens with no cached prefix is prefilled on its decode worker, when that worker
  // offers it (WorkerInfo.local_prefill) and has fewer than `local_prefill_max_load` requests:
  // shipping a short prompt's state costs more than computing it there. 0: never.
  uint32_t local_prefill_max_tokens = 0;  // yoco-router's flag defaults to 128
  uint32_t local_prefill_max_load = 8;
  // Calls to workers: plaintext, TLS (ca) or mutual TLS (ca, cert, key); MakeChannelCredentials.
  TlsFiles worker_tls;
  // --tenants: every public call must come from a tenant, whose name is its cache salt; null:
  // no tenants (a request's own cache_salt partitions the cache). Not owned.
  TenantDirectory* tenants = nullptr;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ROUTER_OPTIONS_H_
