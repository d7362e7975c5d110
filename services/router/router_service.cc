// The router's service: worker membership and probes, the public RPCs besides Generate's flow
// (GenerateStream), and the local-prefill choice.
#include "services/router/router_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "lib/auth/caller_tenant.h"
#include "lib/log/log.h"
#include "lib/model/sampling_params.h"
#include "lib/routing/dns_lookup.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/text/utf8_stream.h"
#include "services/router/generate_stream.h"
#include "services/router/request_checks.h"

namespace yoco {
namespace {

// The model versions both roles run (each list ascending, as HealthyFingerprints gives them).
std::vector<uint64_t> CommonVersions(const std::vector<uint64_t>& decode,
                                     const std::vector<uint64_t>& prefill) {
  std::vector<uint64_t> common;
  std::set_intersection(decode.begin(), decode.end(), prefill.begin(), prefill.end(),
                        std::back_inserter(common));
  return common;
}

// How long a probe may take before the worker counts as unhealthy.
constexpr auto kProbeTimeout = std::chrono::seconds(2);

// GetWorkerInfo on a prefill or decode worker's stub. A worker that masks structured output
// over another vocabulary is not used (0: it has none).
template <typename Stub>
absl::StatusOr<v1::WorkerInfo> ProbeWorkerInfo(Stub& stub, uint64_t vocabulary_fingerprint) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kProbeTimeout);
  v1::WorkerInfo info;
  const grpc::Status st = stub.GetWorkerInfo(&ctx, {}, &info);
  if (!st.ok()) return absl::UnavailableError(st.error_message());
  if (info.vocabulary_fingerprint() != 0 &&
      info.vocabulary_fingerprint() != vocabulary_fingerprint) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the worker's vocabulary (%016x) is not the router's (%016x): give both the same "
        "--tiktoken-ranks",
        info.vocabulary_fingerprint(), vocabulary_fingerprint));
  }
  return info;
}

}  // namespace

RouterService::RouterService(ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                             std::string tokenizer_name, RouterOptions options,
                             RouterMetrics* metrics)
    : config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      tokenizer_name_(std::move(tokenizer_name)),
      vocabulary_fingerprint_(VocabularyFingerprint(TokenBytes(*tokenizer_, config_.vocab_size))),
      options_(std::move(options)),
      own_registry_(metrics ? nullptr : std::make_unique<prometheus::Registry>()),
      own_metrics_(metrics ? nullptr : std::make_unique<RouterMetrics>(*own_registry_)),
      metrics_(metrics ? metrics : own_metrics_.get()),
      load_queue_(options_.max_waiting_requests),
      load_tick_(kLoadTick, [this] {
        if (load_queue_.waiting() > 0) load_queue_.WakeNext();
      }) {
  channel_args_.SetMaxReceiveMessageSize(64 << 20);
  // Reconnect to a restarted worker within a second, not after gRPC's default backoff (which
  // grows to two minutes).
  channel_args_.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  channel_args_.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  channel_args_.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Checked by main before the service is made (MakeChannelCredentials on the same files).
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options_.worker_tls);
  worker_credentials_ = credentials.ok() ? *credentials : grpc::InsecureChannelCredentials();
  prefill_stubs_.reserve(kMaxWorkers);
  decode_stubs_.reserve(kMaxWorkers);
  WorkerProbes prefill_probes;
  prefill_probes.info = [this](size_t i) {
    return ProbeWorkerInfo(*prefill_stubs_[i], vocabulary_fingerprint_);
  };
  prefill_probes.snapshots = [this](size_t i) -> absl::StatusOr<std::vector<IndexedSnapshot>> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kProbeTimeout);
    v1::ListCacheResponse list;
    const grpc::Status st = prefill_stubs_[i]->ListCache(&ctx, {}, &list);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    std::vector<IndexedSnapshot> snapshots;
    for (const v1::CacheEntry& e : list.entries()) {
      auto key = BlockKey::FromHex(e.handle());
      if (!key.ok()) continue;
      snapshots.push_back({*key, e.tier() == "disk",
                           e.expires_unix_ms() == 0 ? absl::InfiniteFuture()
                                                    : absl::FromUnixMillis(e.expires_unix_ms())});
    }
    return snapshots;
  };
  prefill_probes.events = &cache_events_;
  WorkerProbes decode_probes;
  decode_probes.info = [this](size_t i) {
    return ProbeWorkerInfo(*decode_stubs_[i], vocabulary_fingerprint_);
  };
  prefill_workers_ = std::make_unique<WorkerRegistry>(std::vector<std::string>{}, prefill_probes,
                                                      options_.probe_interval);
  decode_workers_ = std::make_unique<WorkerRegistry>(std::vector<std::string>{}, decode_probes,
                                                     options_.probe_interval);
  StallWatchOptions stall;
  stall.multiple = options_.stall_multiple;
  stall.min_timeout = options_.min_stall;
  stall_watch_ = std::make_unique<StallWatch>(
      stall, [this](size_t worker) { return decode_workers_->healthy(worker); },
      [this](size_t worker) {
        for (size_t i = 0; i < decode_workers_->size(); ++i) {
          if (i != worker && decode_workers_->healthy(i)) return true;
        }
        return false;
      });
}

absl::Status RouterService::Start() {
  if (absl::Status st = StartMembership(options_.prefill_workers, true); !st.ok()) return st;
  return StartMembership(options_.decode_workers, false);
}

absl::Status RouterService::StartMembership(const std::vector<std::string>& spec, bool prefill) {
  const char* role = prefill ? "--prefill" : "--decode";
  auto join = [this, prefill](const std::string& address, const std::string& tls_name) {
    prefill ? JoinPrefill(address, tls_name) : JoinDecode(address, tls_name);
  };
  if (spec.size() == 1 && KubernetesWorkerTarget::Matches(spec[0])) {
    absl::StatusOr<KubernetesWorkerTarget> target = KubernetesWorkerTarget::Parse(spec[0]);
    if (!target.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(role, ": ", target.status().message()));
    }
    absl::StatusOr<KubernetesApi> api = KubernetesApi::FromServer(options_.k8s_api_server);
    if (!api.ok())
      return absl::InvalidArgumentError(absl::StrCat(role, ": ", api.status().message()));
    api->token_file = options_.k8s_token_file;
    api->ca_file = options_.k8s_ca_file;
    const std::string what =
        absl::StrCat(prefill ? "prefill" : "decode", " workers (", spec[0], ")");
    pod_watches_.push_back(
        std::make_unique<KubernetesPodWatch>(*api, *target, PodWatchOptions{}, what));
    WorkerRegistry* registry = prefill ? prefill_workers_.get() : decode_workers_.get();
    discovery_.push_back(std::make_unique<WorkerDiscovery>(
        what, [watch = pod_watches_.back().get()] { return watch->Addresses(); },
        [join, name = target->tls_name](const std::string& address) { join(address, name); },
        [registry](const std::string& address) { registry->Remove(address); },
        options_.discovery_interval));
    return absl::OkStatus();
  }
  if (spec.size() == 1 && DnsWorkerTarget::Matches(spec[0])) {
    absl::StatusOr<DnsWorkerTarget> target = DnsWorkerTarget::Parse(spec[0]);
    if (!target.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(role, ": ", target.status().message()));
    }
    WorkerRegistry* registry = prefill ? prefill_workers_.get() : decode_workers_.get();
    discovery_.push_back(std::make_unique<WorkerDiscovery>(
        absl::StrCat(prefill ? "prefill" : "decode", " workers (", spec[0], ")"),
        [t = *target] { return t.Resolve(); },
        // The pods behind a name present certificates for the name, not for their addresses.
        [join, name = target->name](const std::string& address) { join(address, name); },
        [registry](const std::string& address) { registry->Remove(address); },
        options_.discovery_interval));
    return absl::OkStatus();
  }
  for (const std::string& address : spec) {
    if (DnsWorkerTarget::Matches(address) || KubernetesWorkerTarget::Matches(address)) {
      return absl::InvalidArgumentError(
          absl::StrCat(role, ": a dns: or k8s: target stands alone, not in a list"));
    }
    join(address, "");
  }
  return absl::OkStatus();
}

void RouterService::JoinPrefill(const std::string& address, const std::string& tls_name) {
  absl::MutexLock lock(&join_mu_);
  JoinWorker<v1::PrefillWorker>(address, tls_name, prefill_stubs_, *prefill_workers_);
}

void RouterService::JoinDecode(const std::string& address, const std::string& tls_name) {
  absl::MutexLock lock(&join_mu_);
  JoinWorker<v1::DecodeWorker>(address, tls_name, decode_stubs_, *decode_workers_);
}

template <typename WorkerApi>
void RouterService::JoinWorker(const std::string& address, const std::string& tls_name,
                               std::vector<std::unique_ptr<typename WorkerApi::Stub>>& stubs,
                               WorkerRegistry& registry) {
  // A worker seen before keeps its index (and stub); a new one gets the next of both.
  for (size_t i = 0; i < stubs.size(); ++i) {
    if (registry.address(i) == address) {
      registry.Add(address);
      return;
    }
  }
  if (stubs.size() == kMaxWorkers) {
    LogError("a worker is not used: the router takes at most kMaxWorkers of a role")
        .With("address", address)
        .With("max_workers", kMaxWorkers);
    return;
  }
  grpc::ChannelArguments args = channel_args_;
  if (!tls_name.empty()) args.SetSslTargetNameOverride(tls_name);
  stubs.push_back(
      WorkerApi::NewStub(grpc::CreateCustomChannel(address, worker_credentials_, args)));
  registry.Add(address);
}

std::vector<BlockKey> RouterService::UsableKeys(const std::string& salt,
                                                const std::vector<int32_t>& tokens) const {
  if (tokens.empty()) return {};
  const uint64_t fingerprint = prefill_workers_->fingerprint();
  return PrefixBlockKeys(fingerprint, salt,
                         absl::MakeConstSpan(tokens).subspan(0, tokens.size() - 1));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* RouterService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return new GenerateStream(*this, context, request);
}

absl::StatusOr<CallScope> RouterService::Scope(const grpc::ServerContextBase& context,
                                               bool has_salt, const std::string& request_salt) {
  CallScope scope;
  if (options_.tenants == nullptr) {
    scope.salt = request_salt;
    return scope;
  }
  absl::StatusOr<std::string> tenant = CallerTenant(*options_.tenants, context);
  if (!tenant.ok()) {
    metrics_->unauthenticated.Increment();
    return tenant.status();
  }
  if (has_salt) {
    return absl::InvalidArgumentError(
        "cache_salt: this router takes the salt from the caller's tenant; leave it unset");
  }
  scope.tenant = *tenant;
  scope.salt = TenantCacheSalt(scope.tenant);
  scope.scheduling = options_.tenants->Scheduling(scope.tenant);
  scope.prompt_tokens = &metrics_->tenant_prompt_tokens.Add({{"tenant", scope.tenant}});
  scope.generated_tokens = &metrics_->tenant_generated_tokens.Add({{"tenant", scope.tenant}});
  return scope;
}

bool RouterService::PrefillOnDecodeWorker(const std::optional<WorkerChoice>& decode,
                                          const std::optional<WorkerChoice>& prefill,
                                          size_t input_tokens) const {
  if (!decode.has_value() || !decode->info.local_prefill() ||
      input_tokens > options_.local_prefill_max_tokens) {
    return false;
  }
  // A cached prefix makes the prefill worker's part cheap, whatever the length.
  if (prefill.has_value() && prefill->cached_tokens > 0) return false;
  // A local prefill delays the decode worker's batch: only while it is lightly loaded.
  const uint32_t load = decode->info.active_requests() + decode->info.queued_requests();
  return load < options_.local_prefill_max_load;
}

absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> RouterService::AdmitTenant(
    const CallScope& scope, uint64_t prompt_tokens) {
  if (options_.tenants == nullptr || scope.tenant.empty()) {
    return std::unique_ptr<TenantUsage::Lease>();
  }
  absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> lease =
      tenant_usage_.Admit(scope.tenant, options_.tenants->Limits(scope.tenant), prompt_tokens);
  if (!lease.ok()) {
    metrics_->tenant_limit_refusals
        .Add({{"tenant", scope.tenant}, {"limit", TenantUsage::LimitOf(lease.status())}})
        .Increment();
  }
  return lease;
}

uint64_t RouterService::LongestSequenceRows() const {
  return decode_workers_->LongestSequenceRows();
}

WorkerPair RouterService::ChoosePair(const PairRequest& request) {
  WorkerPair pair;
  // During a rollout old and new workers serve side by side: a pair is two workers of one model
  // version (a bundle from other weights would be refused), from the versions both roles run,
  // or the request's own once it has streamed tokens.
  const std::vector<uint64_t> decode_versions =
      decode_workers_->HealthyFingerprints(request.skip_decode);
  const std::vector<uint64_t> prefill_versions =
      prefill_workers_->HealthyFingerprints(request.skip_prefill);
  const std::vector<uint64_t> versions = request.version != 0
                                             ? std::vector<uint64_t>{request.version}
                                             : CommonVersions(decode_versions, prefill_versions);
  // With no version in common only a decode worker that prefills the prompt itself can serve.
  const bool local_possible =
      request.allow_local && request.input_tokens <= options_.local_prefill_max_tokens;
  // A decode worker that holds the prompt's document needs only the question's rows shipped.
  if (!versions.empty() || local_possible) {
    pair.decode =
        decode_workers_->Choose({.exclude = request.skip_decode,
                                 .keys = request.keys,
                                 .prompt_tokens = static_cast<int64_t>(request.input_tokens),
                                 .load_penalty_tokens = options_.cache_load_penalty_tokens,
                                 .fingerprints = versions});
  }
  const uint64_t version = pair.version();
  pair.prefill =
      prefill_workers_->Choose({.exclude = request.skip_prefill,
                                .keys = request.keys,
                                .prompt_tokens = static_cast<int64_t>(request.input_tokens),
                                .load_penalty_tokens = options_.cache_load_penalty_tokens,
                                .disk_penalty_tokens = kDiskPenaltyTokens,
                                .fingerprints = absl::MakeConstSpan(&version, version != 0)});
  pair.local =
      request.allow_local && PrefillOnDecodeWorker(pair.decode, pair.prefill, request.input_tokens);
  return pair;
}

std::unique_ptr<WorkerRegistry::InFlight> RouterService::CountRequest(WorkerRole role,
                                                                      size_t index) {
  return std::make_unique<WorkerRegistry::InFlight>(
      role == WorkerRole::kPrefill ? *prefill_workers_ : *decode_workers_, index);
}

void RouterService::MarkFailed(WorkerRole role, size_t index) {
  if (role == WorkerRole::kPrefill) {
    prefill_workers_->MarkFailed(index);
    metrics_->prefill_worker_failures.Increment();
  } else {
    decode_workers_->MarkFailed(index);
    metrics_->decode_worker_failures.Increment();
  }
}

std::string RouterService::WorkerAddress(WorkerRole role, size_t index) const {
  return role == WorkerRole::kPrefill ? prefill_workers_->address(index)
                                      : decode_workers_->address(index);
}

void RouterService::NoteHeld(size_t decode_index, const BlockKey& key) {
  decode_workers_->NoteHeld(decode_index, key);
}

std::optional<ForgottenReason> RouterService::WhyForgotten(absl::Span<const BlockKey> keys) const {
  return prefill_workers_->WhyForgotten(keys);
}

bool RouterService::CanAdmit() const {
  return !Draining() && !prefill_workers_->HealthyWorkers().empty() &&
         !decode_workers_->HealthyWorkers().empty();
}

grpc::Status RouterService::Tokenize(grpc::ServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) {
  if (auto scope = Scope(*context, false, ""); !scope.ok()) return ToGrpcStatus(scope.status());
  auto ids = tokenizer_->Encode(request->text());
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  response->mutable_ids()->Add(ids->begin(), ids->end());
  return grpc::Status::OK;
}

grpc::Status RouterService::Detokenize(grpc::ServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) {
  if (auto scope = Scope(*context, false, ""); !scope.ok()) return ToGrpcStatus(scope.status());
  auto text =
      tokenizer_->Decode(std::vector<int32_t>(request->ids().begin(), request->ids().end()));
  if (!text.ok()) return ToGrpcStatus(text.status());
  // Ids may end mid-character or spell invalid bytes; a proto3 string must be valid UTF-8.
  response->set_text(ToValidUtf8(*text));
  return grpc::Status::OK;
}

grpc::Status RouterService::GetModelInfo(grpc::ServerContext* context,
                                         const v1::GetModelInfoRequest*, v1::ModelInfo* response) {
  if (auto scope = Scope(*context, false, ""); !scope.ok()) return ToGrpcStatus(scope.status());
  response->set_params_json(config_.ToJson());
  response->set_vocab_size(config_.vocab_size);
  response->set_max_seq_len(config_.max_seq_len);
  response->set_tokenizer(tokenizer_name_);
  response->set_fingerprint(prefill_workers_->fingerprint());
  for (uint64_t version : CommonVersions(decode_workers_->HealthyFingerprints(),
                                         prefill_workers_->HealthyFingerprints())) {
    response->add_fingerprints(version);
  }
  return grpc::Status::OK;
}

}  // namespace yoco
