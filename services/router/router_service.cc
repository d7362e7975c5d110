// The router's request flow: prefill (first token) -> decode stream; on a worker failure,
// prefill again with the tokens already sent and continue.
#include "services/router/router_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "lib/auth/caller_tenant.h"
#include "lib/engine/sampler.h"
#include "lib/routing/dns_lookup.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/text/utf8_stream.h"
#include "services/router/request_checks.h"

namespace yoco {
namespace {

// Routing: what loading a snapshot from a worker's disk costs, in prompt tokens prefilled.
// Reading and checking ~20 MB (an 8K-token snapshot of the 12-layer benchmark shape) takes
// about as long as prefilling a few dozen tokens; memory wins ties.
constexpr int64_t kDiskPenaltyTokens = 64;

// How long a probe may take before the worker counts as unhealthy.
constexpr auto kProbeTimeout = std::chrono::seconds(2);

// GetWorkerInfo on a prefill or decode worker's stub.
template <typename Stub>
absl::StatusOr<v1::WorkerInfo> ProbeWorkerInfo(Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kProbeTimeout);
  v1::WorkerInfo info;
  const grpc::Status st = stub.GetWorkerInfo(&ctx, {}, &info);
  if (!st.ok()) return absl::UnavailableError(st.error_message());
  return info;
}

bool Retryable(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE ||
         st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         st.error_code() == grpc::StatusCode::ABORTED ||
         st.error_code() == grpc::StatusCode::INTERNAL ||
         st.error_code() == grpc::StatusCode::UNKNOWN;
}

// Whether the client cancelled or its deadline passed: then a worker's failing status is the
// client's doing and must not mark the worker failed.
bool ClientGone(const grpc::ServerContext& context) {
  return context.IsCancelled() || std::chrono::system_clock::now() >= context.deadline();
}

grpc::Status ClientGoneStatus(const grpc::ServerContext& context, const grpc::Status& worker) {
  if (std::chrono::system_clock::now() >= context.deadline()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the request's deadline passed (" + worker.error_message() + ")");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

RouterService::RouterService(ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                             std::string tokenizer_name, RouterOptions options,
                             RouterMetrics* metrics)
    : config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      tokenizer_name_(std::move(tokenizer_name)),
      options_(std::move(options)),
      metrics_(metrics) {
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
  prefill_probes.info = [this](size_t i) { return ProbeWorkerInfo(*prefill_stubs_[i]); };
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
  WorkerProbes decode_probes;
  decode_probes.info = [this](size_t i) { return ProbeWorkerInfo(*decode_stubs_[i]); };
  prefill_workers_ = std::make_unique<WorkerRegistry>(std::vector<std::string>{}, prefill_probes,
                                                      options_.probe_interval);
  decode_workers_ = std::make_unique<WorkerRegistry>(std::vector<std::string>{}, decode_probes,
                                                     options_.probe_interval);
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
  std::lock_guard<std::mutex> lock(join_mu_);
  JoinWorker<v1::PrefillWorker>(address, tls_name, prefill_stubs_, *prefill_workers_);
}

void RouterService::JoinDecode(const std::string& address, const std::string& tls_name) {
  std::lock_guard<std::mutex> lock(join_mu_);
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
  if (stubs.size() == kMaxWorkers) return;
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

grpc::Status RouterService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateResponse>* writer) {
  absl::StatusOr<CallScope> scope =
      Scope(*context, !request->cache_salt().empty(), request->cache_salt());
  if (metrics_ && scope.ok() && !scope->tenant.empty()) {
    metrics_->tenant_requests.Add({{"tenant", scope->tenant}}).Increment();
  }
  const grpc::Status status =
      scope.ok() ? DoGenerate(context, request, *scope, writer) : ToGrpcStatus(scope.status());
  if (metrics_) metrics_->Outcome(status.error_code()).Increment();
  return status;
}

absl::StatusOr<RouterService::CallScope> RouterService::Scope(const grpc::ServerContext& context,
                                                              bool has_salt,
                                                              const std::string& request_salt) {
  CallScope scope;
  if (options_.tenants == nullptr) {
    scope.salt = request_salt;
    return scope;
  }
  absl::StatusOr<std::string> tenant = CallerTenant(*options_.tenants, context);
  if (!tenant.ok()) {
    if (metrics_) metrics_->unauthenticated.Increment();
    return tenant.status();
  }
  if (has_salt) {
    return absl::InvalidArgumentError(
        "cache_salt: this router takes the salt from the caller's tenant; leave it unset");
  }
  scope.tenant = *tenant;
  scope.salt = TenantCacheSalt(scope.tenant);
  if (metrics_) {
    scope.prompt_tokens = &metrics_->tenant_prompt_tokens.Add({{"tenant", scope.tenant}});
    scope.generated_tokens = &metrics_->tenant_generated_tokens.Add({{"tenant", scope.tenant}});
  }
  return scope;
}

grpc::Status RouterService::DoGenerate(grpc::ServerContext* context,
                                       const v1::GenerateRequest* request, const CallScope& scope,
                                       grpc::ServerWriter<v1::GenerateResponse>* writer) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<GenerateCall> call =
      CheckGenerateRequest(*request, config_, *tokenizer_, options_.default_max_new_tokens);
  if (!call.ok()) return ToGrpcStatus(call.status());
  const std::vector<int32_t>& prompt = call->prompt;
  const SamplingParams& sampling = call->sampling;
  const uint32_t max_new = call->max_new_tokens;
  const bool stop_at_eos = call->stop_at_eos;

  std::vector<int32_t> generated;
  std::string output_bytes;  // the generated tokens' bytes so far
  size_t text_pos = 0;       // how many of them are already sent as text
  auto last_token_time = start;
  const std::vector<std::string>& stop_strings = call->stop_strings;
  std::string sent_text;
  bool stop_string_hit = false;
  v1::Finish finish;
  auto emit = [&](int32_t id) -> bool {
    generated.push_back(id);
    v1::GenerateResponse out;
    out.mutable_token()->set_id(id);
    out.mutable_token()->set_index(static_cast<uint32_t>(generated.size() - 1));
    // Each token's bytes are appended once; a token the tokenizer cannot spell (a model
    // vocabulary larger than the tokenizer's) shows as U+FFFD.
    auto bytes = tokenizer_->Decode({&id, 1});
    output_bytes += bytes.ok() ? *bytes : std::string("\xEF\xBF\xBD");
    std::string text;
    AppendValidUtf8(output_bytes, &text_pos, &text);
    out.mutable_token()->set_text(text);
    // Stop strings end the stream after the token that completes one.
    const size_t before = sent_text.size();
    sent_text += text;
    for (const std::string& stop : stop_strings) {
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      if (!stop.empty() && sent_text.find(stop, from) != std::string::npos) stop_string_hit = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (generated.size() == 1) {
      finish.mutable_timings()->set_ttft_ms(MsSince(start));
      if (metrics_)
        metrics_->time_to_first_token.Observe(std::chrono::duration<double>(now - start).count());
    } else if (metrics_) {
      metrics_->inter_token.Observe(std::chrono::duration<double>(now - last_token_time).count());
    }
    last_token_time = now;
    if (metrics_) metrics_->generated_tokens.Increment();
    if (scope.generated_tokens != nullptr) scope.generated_tokens->Increment();
    return writer->Write(out);
  };
  auto stops = [&](int32_t id) {
    const auto& ids = sampling.stop_token_ids;
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) return v1::FINISH_REASON_STOP;
    if (stop_at_eos && id == kEosId) return v1::FINISH_REASON_EOS;
    return v1::FINISH_REASON_UNSPECIFIED;
  };

  grpc::Status last_error(grpc::StatusCode::UNAVAILABLE, "no worker answered");
  std::vector<size_t> bad_prefill, bad_decode;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  bool cache_reported = false;
  std::optional<size_t> last_prefill;  // the worker that prefilled last
  bool force_remote = false;           // a decode worker refused to prefill: no more tries
  for (int attempt = 0; attempt < options_.attempts && reason == v1::FINISH_REASON_UNSPECIFIED;
       ++attempt) {
    if (attempt > 0 && metrics_) metrics_->retries.Increment();
    if (context->IsCancelled())
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    std::vector<int32_t> input = prompt;  // the prompt plus whatever was already sent
    input.insert(input.end(), generated.begin(), generated.end());
    const std::vector<BlockKey> keys = UsableKeys(scope.salt, input);
    std::optional<WorkerChoice> decode_choice, prefill_choice;
    const auto wait_until =
        std::min(context->deadline(), std::chrono::system_clock::now() +
                                          absl::ToChronoMilliseconds(options_.wait_for_workers));
    bool local = false;
    while (true) {
      decode_choice = decode_workers_->Choose(bad_decode, {}, 0, 1);
      prefill_choice =
          prefill_workers_->Choose(bad_prefill, keys, static_cast<int64_t>(input.size()),
                                   options_.cache_load_penalty_tokens, kDiskPenaltyTokens);
      local = !force_remote && PrefillOnDecodeWorker(decode_choice, prefill_choice, input.size());
      if (decode_choice.has_value() && (prefill_choice.has_value() || local)) break;
      // Only a request that has not yet lost a worker of its own waits: the others retry on
      // what is healthy or fail.
      if (!bad_decode.empty() || !bad_prefill.empty() || context->IsCancelled() ||
          std::chrono::system_clock::now() >= wait_until) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!decode_choice.has_value() || (!prefill_choice.has_value() && !local)) {
      // A worker's own refusal (RESOURCE_EXHAUSTED: all full) says more than this.
      if (last_error.ok()) {
        last_error =
            grpc::Status(grpc::StatusCode::UNAVAILABLE, "no healthy prefill or decode worker");
      }
      break;
    }
    const size_t decode_index = decode_choice->index;
    WorkerRegistry::InFlight decode_in_flight(*decode_workers_, decode_index);
    if (local) {
      if (!cache_reported) {
        cache_reported = true;
        finish.set_cache_tier("none");
        finish.set_cache_miss_reason("none");
      }
      finish.set_local_prefill(true);
      if (metrics_) metrics_->local_prefills.Increment();
      v1::DecodeRequest dec;
      dec.set_request_id(request->request_id());
      dec.mutable_prompt()->Add(input.begin(), input.end());
      ToProto(sampling, dec.mutable_sampling());
      dec.set_max_new_tokens(max_new - static_cast<uint32_t>(generated.size()));
      dec.set_stop_at_eos(stop_at_eos);
      const DecodeOutcome out =
          RunDecode(*context, decode_index, dec, /*local=*/true, finish, emit, stop_string_hit);
      if (out.reason != v1::FINISH_REASON_UNSPECIFIED) {
        reason = out.reason;
        break;
      }
      if (out.client_gone) return out.status;
      if (out.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
          out.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        // It does not prefill (any more), or its prefill queue is full: a prefill worker's turn.
        last_error = out.status;
        force_remote = true;
        continue;
      }
      if (!out.status.ok() && !Retryable(out.status)) return out.status;
      last_error = out.status.ok()
                       ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode stream ended early")
                       : out.status;
      decode_workers_->MarkFailed(decode_index);
      if (metrics_) metrics_->decode_worker_failures.Increment();
      bad_decode.push_back(decode_index);
      continue;
    }
    const size_t prefill_index = prefill_choice->index;
    if (prefill_choice->better_holder.has_value()) CopySnapshotLater(*prefill_choice, keys);
    const v1::WorkerInfo& decode_info = decode_choice->info;
    // Phase 1: prefill the prompt plus whatever was already sent; it returns the next token.
    v1::PrefillRequest pre;
    pre.set_request_id(request->request_id());
    pre.mutable_prompt()->Add(input.begin(), input.end());
    pre.set_cache_salt(scope.salt);
    ToProto(sampling, pre.mutable_sampling());
    pre.set_decode_ucx_address(decode_info.ucx_address());
    pre.set_transfer_timeout_ms(options_.transfer_timeout_ms);
    pre.set_max_new_tokens(max_new - static_cast<uint32_t>(generated.size()));
    pre.set_stop_at_eos(stop_at_eos);
    v1::PrefillResponse pre_out;
    grpc::Status pre_st;
    bool decode_blamed = false;
    {
      WorkerRegistry::InFlight prefill_in_flight(*prefill_workers_, prefill_index);
      // Propagates the client's deadline and cancellation to the prefill worker.
      std::unique_ptr<grpc::ClientContext> pre_ctx =
          grpc::ClientContext::FromServerContext(*context);
      pre_st = prefill_stubs_[prefill_index]->Prefill(pre_ctx.get(), pre, &pre_out);
      const auto& trailers = pre_ctx->GetServerTrailingMetadata();
      const auto blamed = trailers.find(kFailedPeerMetadata);
      decode_blamed =
          !pre_st.ok() && blamed != trailers.end() && blamed->second == kFailedPeerDecode;
    }
    if (!pre_st.ok()) {
      // The client's own deadline or cancellation says nothing about the worker.
      if (ClientGone(*context)) return ClientGoneStatus(*context, pre_st);
      if (pre_st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        // A full queue (the prefill worker's, or the decode worker's refusing the bundle) is
        // load, not failure: another pair for this request, both stay healthy.
        last_error = pre_st;
        bad_prefill.push_back(prefill_index);
        bad_decode.push_back(decode_index);
        continue;
      }
      if (!Retryable(pre_st)) return pre_st;
      last_error = pre_st;
      if (decode_blamed) {
        // The prompt was prefilled but its state could not reach the decode worker (dead before
        // the probes noticed): that worker failed; the same prefill worker may serve the retry.
        decode_workers_->MarkFailed(decode_index);
        if (metrics_) metrics_->decode_worker_failures.Increment();
        bad_decode.push_back(decode_index);
        continue;
      }
      prefill_workers_->MarkFailed(prefill_index);
      if (metrics_) metrics_->prefill_worker_failures.Increment();
      bad_prefill.push_back(prefill_index);
      continue;
    }
    last_prefill = prefill_index;
    if (!cache_reported) {  // the first prefill is the one that saw the client's prompt
      cache_reported = true;
      finish.mutable_usage()->set_cached_prompt_tokens(
          std::min<uint32_t>(pre_out.cached_tokens(), static_cast<uint32_t>(prompt.size())));
      finish.set_cache_tier(pre_out.cache_tier());
      finish.set_cache_miss_reason(pre_out.cache_miss_reason());
      // A worker that never held the prompt's snapshot says "none"; the index may know better.
      if (pre_out.cache_miss_reason() == "none") {
        if (std::optional<ForgottenReason> why = prefill_workers_->WhyForgotten(keys)) {
          finish.set_cache_miss_reason(*why == ForgottenReason::kExpired ? "expired" : "evicted");
        }
      }
      if (metrics_ && pre_out.cached_tokens() > 0) {
        metrics_->cache_hits.Increment();
        metrics_->cached_prompt_tokens.Increment(pre_out.cached_tokens());
      }
    }
    finish.mutable_timings()->set_prefill_ms(finish.timings().prefill_ms() + pre_out.prefill_ms());
    finish.mutable_timings()->set_transfer_ms(finish.timings().transfer_ms() +
                                              pre_out.transfer_ms());
    finish.set_transfer_bytes(finish.transfer_bytes() + pre_out.bundle_bytes());
    if (!emit(pre_out.first_token()))
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    if ((reason = stops(pre_out.first_token())) != v1::FINISH_REASON_UNSPECIFIED) break;
    if (stop_string_hit) {
      reason = v1::FINISH_REASON_STOP;
      break;
    }
    if (generated.size() >= max_new) {
      reason = v1::FINISH_REASON_LENGTH;
      break;
    }
    // Transfer ids start at 1: an id of 0 means nothing was shipped (a worker from before
    // bundle_shipped existed always ships).
    if (!pre_out.bundle_shipped() && pre_out.transfer_id() == 0) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "the prefill worker shipped no state for a request that continues");
    }
    // Phase 2: the decode worker streams the rest.
    v1::DecodeRequest dec;
    dec.set_request_id(request->request_id());
    dec.set_sender_transport(pre_out.sender_transport());
    dec.set_transfer_id(pre_out.transfer_id());
    dec.set_max_new_tokens(max_new - static_cast<uint32_t>(generated.size()));
    dec.set_wait_for_bundle_ms(options_.transfer_timeout_ms);
    dec.set_stop_at_eos(stop_at_eos);
    const DecodeOutcome out =
        RunDecode(*context, decode_index, dec, /*local=*/false, finish, emit, stop_string_hit);
    if (out.reason != v1::FINISH_REASON_UNSPECIFIED) {
      reason = out.reason;
      break;
    }
    if (out.client_gone) return out.status;
    if (!out.status.ok() && !Retryable(out.status)) return out.status;
    last_error = out.status.ok()
                     ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode stream ended early")
                     : out.status;
    // Continue on another pair with the tokens sent so far.
    decode_workers_->MarkFailed(decode_index);
    if (metrics_) metrics_->decode_worker_failures.Increment();
    bad_decode.push_back(decode_index);
  }
  if (reason == v1::FINISH_REASON_UNSPECIFIED) return last_error;
  finish.set_reason(reason);
  finish.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt.size()));
  finish.mutable_usage()->set_generated_tokens(static_cast<uint32_t>(generated.size()));
  if (scope.prompt_tokens != nullptr) scope.prompt_tokens->Increment(prompt.size());
  v1::GenerateResponse out;
  *out.mutable_finish() = finish;
  writer->Write(out);
  if (options_.snapshot_conversations && last_prefill.has_value()) {
    std::vector<int32_t> conversation = prompt;
    conversation.insert(conversation.end(), generated.begin(), generated.end());
    SnapshotConversation(*last_prefill, prompt.size(), std::move(conversation), scope.salt);
  }
  return grpc::Status::OK;
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

RouterService::DecodeOutcome RouterService::RunDecode(
    grpc::ServerContext& context, size_t decode_index, const v1::DecodeRequest& dec, bool local,
    v1::Finish& finish, const std::function<bool(int32_t)>& emit, const bool& stop_string_hit) {
  DecodeOutcome out;
  const auto decode_start = std::chrono::steady_clock::now();
  grpc::ClientContext dec_ctx;
  dec_ctx.set_deadline(context.deadline());
  auto stream = decode_stubs_[decode_index]->Decode(&dec_ctx, dec);
  v1::DecodeEvent event;
  bool first = true;
  while (stream->Read(&event)) {
    if (context.IsCancelled()) {
      dec_ctx.TryCancel();
      out.client_gone = true;
      out.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
      return out;
    }
    if (event.has_token()) {
      if (local && first) {  // the decode worker's prefill ends with its first token
        finish.mutable_timings()->set_prefill_ms(finish.timings().prefill_ms() +
                                                 MsSince(decode_start));
      }
      first = false;
      if (!emit(event.token().id())) {
        dec_ctx.TryCancel();
        out.client_gone = true;
        out.status = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        return out;
      }
      if (stop_string_hit) {  // the decode worker's sequence ends with the call
        out.reason = v1::FINISH_REASON_STOP;
        dec_ctx.TryCancel();
        break;
      }
    } else if (event.has_finish()) {
      out.reason = event.finish().reason();
    }
  }
  out.status = stream->Finish();
  finish.mutable_timings()->set_decode_ms(finish.timings().decode_ms() + MsSince(decode_start));
  if (out.reason == v1::FINISH_REASON_UNSPECIFIED && !out.status.ok() && ClientGone(context)) {
    out.client_gone = true;
    out.status = ClientGoneStatus(context, out.status);
  }
  return out;
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
  return grpc::Status::OK;
}

}  // namespace yoco
