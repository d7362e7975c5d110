// RouterService: the public Yoco API. Tokenises, picks the least-loaded prefill and decode
// workers, drives both phases and streams tokens. If a worker fails mid-request the request
// continues on another pair: the prompt plus the tokens already sent are prefilled again, and
// since sampling is a function of (seed, position) the stream goes on exactly as it would have.
#ifndef YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
#define YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/auth/tenant_directory.h"
#include "lib/engine/model_config.h"
#include "lib/routing/kubernetes_pod_watch.h"
#include "lib/routing/load_wait_queue.h"
#include "lib/routing/stall_watch.h"
#include "lib/routing/worker_discovery.h"
#include "lib/routing/worker_registry.h"
#include "lib/rpc/tls_credentials.h"
#include "lib/text/tokenizer.h"
#include "lib/threading/bounded_job_queue.h"
#include "lib/threading/periodic_task.h"
#include "services/router/router_metrics.h"
#include "yoco/v1/worker.grpc.pb.h"
#include "yoco/v1/yoco.grpc.pb.h"

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

// Generate is on gRPC's callback API (GenerateStream: an open stream holds no thread); the
// other methods are synchronous.
class RouterService final : public v1::Yoco::WithCallbackMethod_Generate<v1::Yoco::Service> {
 public:
  // `metrics` may be null.
  RouterService(ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                std::string tokenizer_name, RouterOptions options, RouterMetrics* metrics);

  // The workers' membership: INVALID_ARGUMENT for a bad --prefill/--decode spec. Call once,
  // before serving.
  absl::Status Start();

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status Detokenize(grpc::ServerContext* context, const v1::DetokenizeRequest* request,
                          v1::DetokenizeResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;
  grpc::Status Precache(grpc::ServerContext* context, const v1::PrecacheRequest* request,
                        v1::PrecacheResponse* response) override;
  grpc::Status PrecacheWithProgress(grpc::ServerContext* context,
                                    const v1::PrecacheRequest* request,
                                    grpc::ServerWriter<v1::PrecacheProgress>* writer) override;
  grpc::Status ListCache(grpc::ServerContext* context, const v1::ListCacheRequest* request,
                         v1::ListCacheResponse* response) override;
  grpc::Status EvictCache(grpc::ServerContext* context, const v1::EvictCacheRequest* request,
                          v1::EvictCacheResponse* response) override;

  // Background jobs (conversation snapshots) queued or running, for metrics.
  size_t background_jobs() { return background_.pending(); }
  // Requests waiting at the router for a worker with room, for metrics.
  size_t requests_waiting_for_room() const { return load_queue_.waiting(); }

  // Whether a request would find a healthy prefill and decode worker now (and the router is not
  // draining): the HTTP front's readiness.
  bool CanAdmit() const;

  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  // Precache and PrecacheWithProgress: the checks, the worker's choice and its call; with
  // `progress`, the worker's progress messages are relayed to it (a worker without the
  // streaming method is asked the plain way).
  grpc::Status RunPrecache(grpc::ServerContext* context, const v1::PrecacheRequest& request,
                           const std::function<void(const v1::PrecacheProgress&)>& progress,
                           v1::PrecacheResponse* response);
  // Who a call is from and the cache salt its work uses.
  struct CallScope {
    std::string tenant;  // empty without --tenants
    std::string salt;
    prometheus::Counter* prompt_tokens = nullptr;  // the tenant's counters, if any
    prometheus::Counter* generated_tokens = nullptr;
  };
  // Without --tenants: the request's own salt. With them: the caller's tenant's salt;
  // UNAUTHENTICATED for a caller who is no tenant, INVALID_ARGUMENT for a request that names a
  // salt itself (it could otherwise reach another tenant's snapshots).
  friend class GenerateStream;
  absl::StatusOr<CallScope> Scope(const grpc::ServerContextBase& context, bool has_salt,
                                  const std::string& request_salt);
  // Whether this attempt prefills on the decode worker (RouterOptions::local_prefill_max_tokens).
  bool PrefillOnDecodeWorker(const std::optional<WorkerChoice>& decode,
                             const std::optional<WorkerChoice>& prefill, size_t input_tokens) const;
  // Whether the client cancelled or its deadline passed: then a worker's failing status is the
  // client's doing and must not mark the worker failed.
  static bool ClientGone(const grpc::ServerContextBase& context);
  static grpc::Status ClientGoneStatus(const grpc::ServerContextBase& context,
                                       const grpc::Status& worker);
  // Routing: what loading a snapshot from a worker's disk costs, in prompt tokens prefilled.
  // Reading and checking ~20 MB (an 8K-token snapshot of the 12-layer benchmark shape) takes
  // about as long as prefilling a few dozen tokens; memory wins ties.
  static constexpr int64_t kDiskPenaltyTokens = 64;
  // How often load_tick_ wakes a waiter: a woken request that finds no room costs one refused
  // worker call, and room freed elsewhere is found within this.
  static constexpr absl::Duration kLoadTick = absl::Milliseconds(20);
  // The block keys of `tokens` a prefill can resume from (all but the last token's block).
  std::vector<BlockKey> UsableKeys(const std::string& salt,
                                   const std::vector<int32_t>& tokens) const;
  // Queues a copy of the prompt's longest snapshot to the worker chosen instead of its holder.
  void CopySnapshotLater(const WorkerChoice& choice, const std::vector<BlockKey>& keys);
  // Queues the conversation snapshot of `tokens` (prompt + generated) on a prefill worker.
  void SnapshotConversation(size_t prefill_index, size_t prompt_tokens, std::vector<int32_t> tokens,
                            const std::string& salt);

  const ModelConfig config_;
  const std::unique_ptr<Tokenizer> tokenizer_;
  const std::string tokenizer_name_;
  const RouterOptions options_;
  RouterMetrics* const metrics_;
  // A worker joins: its stub first, then the registry (which probes through it). The stub
  // vectors are reserved for kMaxWorkers so that growing them never moves a stub a request
  // thread is using; a worker index is the same in both.
  // `tls_name`: the name the worker's certificate must carry (a dns:/// target's name); empty:
  // its address.
  void JoinPrefill(const std::string& address, const std::string& tls_name);
  void JoinDecode(const std::string& address, const std::string& tls_name);
  template <typename WorkerApi>  // join_mu_ held
  void JoinWorker(const std::string& address, const std::string& tls_name,
                  std::vector<std::unique_ptr<typename WorkerApi::Stub>>& stubs,
                  WorkerRegistry& registry);
  // Static lists join at once; a dns:/// target gets a WorkerDiscovery.
  absl::Status StartMembership(const std::vector<std::string>& spec, bool prefill);

  static constexpr size_t kMaxWorkers = 4096;
  grpc::ChannelArguments channel_args_;
  std::shared_ptr<grpc::ChannelCredentials> worker_credentials_;
  std::mutex join_mu_;  // JoinPrefill / JoinDecode
  std::vector<std::unique_ptr<v1::PrefillWorker::Stub>> prefill_stubs_;
  std::vector<std::unique_ptr<v1::DecodeWorker::Stub>> decode_stubs_;
  std::unique_ptr<WorkerRegistry> prefill_workers_;  // after the stubs: it probes through them
  std::unique_ptr<WorkerRegistry> decode_workers_;
  // Decode streams watched for a worker that stops sending; its sweeper reads decode_workers_.
  std::unique_ptr<StallWatch> stall_watch_;
  std::vector<std::unique_ptr<KubernetesPodWatch>> pod_watches_;  // read by discovery_
  std::vector<std::unique_ptr<WorkerDiscovery>> discovery_;       // after the registries it feeds
  std::mutex copies_mu_;
  std::set<std::pair<BlockKey, size_t>> copies_;  // (snapshot, target worker) queued or running
  LoadWaitQueue load_queue_;
  BoundedJobQueue background_{64};  // its jobs use the members above
  // Wakes a waiter now and then, for room nothing at this router announces (other routers'
  // requests ending, workers coming back). Last: it uses load_queue_.
  PeriodicTask load_tick_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
