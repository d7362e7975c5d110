// RouterService: the public Yoco API. Tokenises, picks the least-loaded prefill and decode
// workers, drives both phases and streams tokens. If a worker fails mid-request the request
// continues on another pair: the prompt plus the tokens already sent are prefilled again, and
// since sampling is a function of (seed, position) the stream goes on exactly as it would have.
#ifndef YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
#define YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "lib/auth/tenant_directory.h"
#include "lib/model/model_config.h"
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
#include "services/router/router_options.h"
#include "services/router/worker_pool.h"
#include "yoco/v1/worker.grpc.pb.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {

// Generate is on gRPC's callback API (GenerateStream: an open stream holds no thread, and sees
// the router only as a WorkerPool); the other methods are synchronous.
class RouterService final : public v1::Yoco::WithCallbackMethod_Generate<v1::Yoco::Service>,
                            private WorkerPool {
 public:
  // `metrics` may be null (the service then keeps its own, unexported).
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
  grpc::Status WatchCache(grpc::ServerContext* context, const v1::WatchCacheRequest* request,
                          grpc::ServerWriter<v1::CacheEvent>* writer) override;
  grpc::Status Score(grpc::ServerContext* context, const v1::ScoreRequest* request,
                     v1::ScoreResponse* response) override;

  // Background jobs (conversation snapshots) queued or running, for metrics.
  size_t background_jobs() { return background_.pending(); }
  // Requests waiting at the router for a worker with room, for metrics.
  size_t requests_waiting_for_room() const { return load_queue_.waiting(); }

  // Whether a request would find a healthy prefill and decode worker now (and the router is not
  // draining): the HTTP front's readiness.
  bool CanAdmit() const;

  const Tokenizer& tokenizer() const override { return *tokenizer_; }

 private:
  // Precache and PrecacheWithProgress: the checks, the worker's choice and its call; with
  // `progress`, the worker's progress messages are relayed to it (a worker without the
  // streaming method is asked the plain way).
  grpc::Status RunPrecache(grpc::ServerContext* context, const v1::PrecacheRequest& request,
                           const std::function<void(const v1::PrecacheProgress&)>& progress,
                           v1::PrecacheResponse* response);
  // The pinned snapshots under `salt` across the healthy prefill workers: handle -> bytes (a
  // copy on a second worker counts once).
  std::map<std::string, uint64_t> PinnedSnapshots(const grpc::ServerContext& context,
                                                  const std::string& salt);
  // A pin refused by `tenant`'s max_pinned_snapshot_bytes (counted in the refusal metric).
  grpc::Status RefusePin(const std::string& tenant, uint64_t pinned, uint64_t adding,
                         uint64_t limit);
  // WorkerPool, for GenerateStream.
  const RouterOptions& options() const override { return options_; }
  const ModelConfig& config() const override { return config_; }
  RouterMetrics& metrics() override { return *metrics_; }
  absl::StatusOr<CallScope> Scope(const grpc::ServerContextBase& context, bool has_salt,
                                  const std::string& request_salt) override;
  std::vector<BlockKey> UsableKeys(const std::string& salt,
                                   const std::vector<int32_t>& tokens) const override;
  uint64_t LongestSequenceRows() const override;
  absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> AdmitTenant(const CallScope& scope,
                                                                  uint64_t prompt_tokens) override;
  WorkerPair ChoosePair(const PairRequest& request) override;
  v1::PrefillWorker::StubInterface& PrefillStub(size_t index) override {
    return *prefill_stubs_[index];
  }
  v1::DecodeWorker::StubInterface& DecodeStub(size_t index) override {
    return *decode_stubs_[index];
  }
  std::unique_ptr<WorkerRegistry::InFlight> CountRequest(WorkerRole role, size_t index) override;
  void MarkFailed(WorkerRole role, size_t index) override;
  std::string WorkerAddress(WorkerRole role, size_t index) const override;
  void NoteHeld(size_t decode_index, const BlockKey& key) override;
  std::optional<ForgottenReason> WhyForgotten(absl::Span<const BlockKey> keys) const override;
  void CopySnapshotLater(const WorkerChoice& choice, const std::vector<BlockKey>& keys) override;
  void SnapshotConversation(size_t prefill_index, size_t prompt_tokens, std::vector<int32_t> tokens,
                            const std::string& salt, const v1::Scheduling& scheduling) override;
  LoadWaitQueue& load_queue() override { return load_queue_; }
  StallWatch& stall_watch() override { return *stall_watch_; }

  // Whether this attempt prefills on the decode worker (RouterOptions::local_prefill_max_tokens).
  bool PrefillOnDecodeWorker(const std::optional<WorkerChoice>& decode,
                             const std::optional<WorkerChoice>& prefill, size_t input_tokens) const;
  // Routing: what loading a snapshot from a worker's disk costs, in prompt tokens prefilled.
  // Reading and checking ~20 MB (an 8K-token snapshot of the 12-layer benchmark shape) takes
  // about as long as prefilling a few dozen tokens; memory wins ties.
  static constexpr int64_t kDiskPenaltyTokens = 64;
  // How often load_tick_ wakes a waiter: a woken request that finds no room costs one refused
  // worker call, and room freed elsewhere is found within this.
  static constexpr absl::Duration kLoadTick = absl::Milliseconds(20);

  const ModelConfig config_;
  const std::unique_ptr<Tokenizer> tokenizer_;
  const std::string tokenizer_name_;
  const uint64_t vocabulary_fingerprint_;  // of tokenizer_'s bytes: the workers' must equal it
  const RouterOptions options_;
  std::unique_ptr<prometheus::Registry> own_registry_;  // without metrics from main
  std::unique_ptr<RouterMetrics> own_metrics_;
  RouterMetrics* const metrics_;  // never null
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
  absl::Mutex join_mu_;  // JoinPrefill / JoinDecode
  std::vector<std::unique_ptr<v1::PrefillWorker::Stub>> prefill_stubs_;
  std::vector<std::unique_ptr<v1::DecodeWorker::Stub>> decode_stubs_;
  CacheEventLog cache_events_;                       // before the registry that appends to it
  std::unique_ptr<WorkerRegistry> prefill_workers_;  // after the stubs: it probes through them
  std::unique_ptr<WorkerRegistry> decode_workers_;
  // Decode streams watched for a worker that stops sending; its sweeper reads decode_workers_.
  std::unique_ptr<StallWatch> stall_watch_;
  std::vector<std::unique_ptr<KubernetesPodWatch>> pod_watches_;  // read by discovery_
  std::vector<std::unique_ptr<WorkerDiscovery>> discovery_;       // after the registries it feeds
  absl::Mutex copies_mu_;
  std::set<std::pair<BlockKey, size_t>> copies_
      ABSL_GUARDED_BY(copies_mu_);  // (snapshot, target worker) queued or running
  LoadWaitQueue load_queue_;
  TenantUsage tenant_usage_;        // against the tenant file's limits
  BoundedJobQueue background_{64};  // its jobs use the members above
  // Wakes a waiter now and then, for room nothing at this router announces (other routers'
  // requests ending, workers coming back). Last: it uses load_queue_.
  PeriodicTask load_tick_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
