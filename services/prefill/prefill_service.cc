// Prefill RPCs.
#include "services/prefill/prefill_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/cache/snapshot_changes.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/rpc/trace_metadata.h"
#include "lib/trace/tracer.h"

namespace yoco {
namespace {

void ToProto(const SnapshotInfo& info, const std::string& worker, v1::CacheEntry* out) {
  out->set_handle(info.key.Hex());
  out->set_tokens(static_cast<uint32_t>(info.tokens));
  out->set_bytes(static_cast<uint64_t>(info.bytes));
  out->set_tier(CacheTierName(info.tier));
  out->set_pinned(info.pinned);
  out->set_hits(info.hits);
  out->set_worker(worker);
  out->set_expires_unix_ms(
      info.expires == absl::InfiniteFuture() ? 0 : absl::ToUnixMillis(info.expires));
}

// The fields a first-token message carries (PrefillResponse.first_token_only), which the whole
// response repeats.
void FirstTokenToProto(const PrefillResult& result, v1::PrefillResponse* response) {
  response->set_first_token(result.first_token);
  if (result.first_logprobs.has_value()) {
    ToProto(*result.first_logprobs, response->mutable_first_token_logprob(),
            response->mutable_first_token_top_logprobs());
  }
  for (const ChoiceDraw& draw : result.choice_first) {
    v1::GeneratedToken* first = response->add_choice_first_tokens();
    first->set_id(draw.token);
    first->set_choice(draw.choice);
    if (draw.logprobs.has_value()) {
      ToProto(*draw.logprobs, first->mutable_logprob(), first->mutable_top_logprobs());
    }
  }
  response->set_prefill_ms(result.prefill_ms);
  response->set_cached_tokens(static_cast<uint32_t>(result.cached_tokens));
  response->set_cache_tier(CacheTierName(result.cache_tier));
  if (result.cache_miss != CacheMiss::kHit) {
    response->set_cache_miss_reason(CacheMissName(result.cache_miss));
  }
}

}  // namespace

grpc::Status PrefillService::CheckTokens(
    const google::protobuf::RepeatedField<int32_t>& tokens) const {
  const int vocab = worker_.model().config().vocab_size;
  for (int32_t id : tokens) {
    if (id < 0 || id >= vocab) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return grpc::Status::OK;
}

grpc::Status PrefillService::Prefill(grpc::ServerContext* context,
                                     const v1::PrefillRequest* request,
                                     v1::PrefillResponse* response) {
  return TracedPrefill(context, request, response, nullptr);
}

grpc::Status PrefillService::PrefillStream(grpc::ServerContext* context,
                                           const v1::PrefillRequest* request,
                                           grpc::ServerWriter<v1::PrefillResponse>* writer) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.PrefillStream"); !st.ok()) {
    return st;
  }
  v1::PrefillResponse response;
  // (A write that fails means the caller went: the prefill's cancel check sees it.)
  const grpc::Status status =
      TracedPrefill(context, request, &response,
                    [writer](const v1::PrefillResponse& first) { writer->Write(first); });
  if (status.ok()) writer->Write(response);
  return status;
}

grpc::Status PrefillService::TracedPrefill(
    grpc::ServerContext* context, const v1::PrefillRequest* request, v1::PrefillResponse* response,
    const std::function<void(const v1::PrefillResponse&)>& first_token) {
  // Under the router's prefill span (its context came in the call's metadata).
  const std::optional<TraceContext> parent = TraceFromMetadata(context->client_metadata());
  Span span = GlobalTracer()->StartSpan("yoco.prefill.run", SpanKind::kServer,
                                        parent.has_value() ? &*parent : nullptr);
  span.SetAttribute("gen_ai.usage.input_tokens", request->prompt_size());
  const grpc::Status status = RunPrefill(context, request, span.context(), response, first_token);
  if (status.ok() && span.recording()) {
    span.SetAttribute("yoco.cached_tokens", response->cached_tokens())
        .SetAttribute("yoco.cache.tier", response->cache_tier())
        .SetAttribute("yoco.prefill_ms", response->prefill_ms());
    if (!response->cache_miss_reason().empty()) {
      span.SetAttribute("yoco.cache.miss_reason", response->cache_miss_reason());
    }
    if (response->bundle_shipped()) {
      // The bundle's send to the decode worker over UCX: the call's last transfer_ms.
      const absl::Time end = absl::Now();
      Span transfer =
          GlobalTracer()->StartSpan("yoco.bundle.transfer", SpanKind::kInternal, &span.context(),
                                    end - absl::Milliseconds(response->transfer_ms()));
      transfer.SetAttribute("yoco.bundle.bytes", response->bundle_bytes())
          .SetAttribute("yoco.bundle.parts", response->bundle_parts())
          .SetAttribute("yoco.bundle.resident_blocks", response->resident_blocks())
          .SetAttribute("yoco.transfer_id", response->transfer_id());
      transfer.End(end);
    }
  }
  EndSpan(span, status);
  return status;
}

grpc::Status PrefillService::RunPrefill(
    grpc::ServerContext* context, const v1::PrefillRequest* request, const TraceContext& span,
    v1::PrefillResponse* response,
    const std::function<void(const v1::PrefillResponse&)>& first_token) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.Prefill"); !st.ok()) return st;
  if (grpc::Status st = CheckTokens(request->prompt()); !st.ok()) return st;
  if (request->choices_size() > kMaxChoices) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("at most ", kMaxChoices, " choices; this call has ", request->choices_size()));
  }
  ++active_;
  struct Done {
    std::atomic<size_t>& active;
    ~Done() { --active; }
  } done{active_};
  PrefillCall call;
  call.choices.assign(request->choices().begin(), request->choices().end());
  call.prompt.assign(request->prompt().begin(), request->prompt().end());
  call.sampling = FromProto(request->sampling());
  call.cache_salt = request->cache_salt();
  call.decode_address = request->decode_ucx_address();
  if (request->transfer_timeout_ms() > 0) {
    call.transfer_timeout = absl::Milliseconds(request->transfer_timeout_ms());
  }
  call.cancelled = [context] { return context->IsCancelled(); };
  call.max_new_tokens = static_cast<int>(std::min<uint32_t>(request->max_new_tokens(), 1u << 30));
  call.stop_at_eos = request->stop_at_eos();
  call.decode_resident_blocks = request->decode_resident_blocks();
  call.scheduling = FromProto(request->scheduling());
  call.generated_tail = request->generated_tokens();
  if (request->trace_transfer() && span.valid()) call.transfer_trace = span;
  if (first_token) {
    call.on_first_token = [&first_token](const PrefillResult& result) {
      v1::PrefillResponse first;
      first.set_first_token_only(true);
      FirstTokenToProto(result, &first);
      first_token(first);
    };
  }
  auto result = worker_.Prefill(call);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kCancelled) ++cancelled_;
    if (result.status().GetPayload(kDecodePeerFailedPayload).has_value()) {
      context->AddTrailingMetadata(kFailedPeerMetadata, kFailedPeerDecode);
    }
    return ToGrpcStatus(result.status());
  }
  FirstTokenToProto(*result, response);
  response->set_bundle_shipped(result->shipped);
  response->set_bundle_bytes(result->bundle_bytes);
  response->set_transfer_ms(result->transfer_ms);
  response->set_transfer_id(result->transfer_id);
  response->set_sender_transport(result->sender);
  response->set_resident_blocks(static_cast<uint32_t>(result->resident_chunks));
  response->set_bundle_parts(static_cast<uint32_t>(result->bundle_parts));
  response->set_early_parts(static_cast<uint32_t>(result->early_parts));
  return grpc::Status::OK;
}

grpc::Status PrefillService::Score(grpc::ServerContext* context,
                                   const v1::WorkerScoreRequest* request,
                                   v1::ScoreResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.Score"); !st.ok()) return st;
  if (grpc::Status st = CheckTokens(request->tokens()); !st.ok()) return st;
  if (request->top_logprobs() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs, "]"));
  }
  ++active_;
  struct Done {
    std::atomic<size_t>& active;
    ~Done() { --active; }
  } done{active_};
  const std::vector<int32_t> tokens(request->tokens().begin(), request->tokens().end());
  absl::StatusOr<std::vector<TokenLogprobs>> scored = worker_.Score(
      tokens, static_cast<int>(request->top_logprobs()),
      [context] { return context->IsCancelled(); }, FromProto(request->scheduling()));
  if (!scored.ok()) return ToGrpcStatus(scored.status());
  double total = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    v1::GeneratedToken* token = response->add_tokens();
    token->set_id(tokens[i]);
    token->set_index(static_cast<uint32_t>(i));
    if (i == 0) continue;  // nothing precedes it
    const TokenLogprobs& l = (*scored)[i - 1];
    ToProto(l, token->mutable_logprob(), token->mutable_top_logprobs());
    total += l.chosen.logprob;
  }
  response->set_total_logprob(total);
  return grpc::Status::OK;
}

grpc::Status PrefillService::GetWorkerInfo(grpc::ServerContext* context,
                                           const v1::GetWorkerInfoRequest*,
                                           v1::WorkerInfo* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.GetWorkerInfo"); !st.ok()) {
    return st;
  }
  response->set_worker_id(worker_id_);
  response->set_backend(backend_);
  response->set_ucx_address(worker_.transport().address());
  response->set_streams_first_token(true);
  response->set_model_fingerprint(worker_.model().fingerprint());
  response->set_vocabulary_fingerprint(worker_.vocabulary_fingerprint());
  response->set_active_requests(static_cast<uint32_t>(active_requests()));
  if (SnapshotStore* cache = worker_.cache()) {
    const SnapshotStoreStats stats = cache->stats();
    response->set_cache_generation(cache->generation());
    response->set_cache_bytes(static_cast<uint64_t>(stats.bytes));
  }
  return grpc::Status::OK;
}

grpc::Status PrefillService::Precache(grpc::ServerContext* context,
                                      const v1::WorkerPrecacheRequest* request,
                                      v1::PrecacheResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.Precache"); !st.ok()) return st;
  return RunPrecache(context, *request, nullptr, response);
}

grpc::Status PrefillService::PrecacheWithProgress(
    grpc::ServerContext* context, const v1::WorkerPrecacheRequest* request,
    grpc::ServerWriter<v1::PrecacheProgress>* writer) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.PrecacheWithProgress"); !st.ok()) {
    return st;
  }
  // At most one message per percent: a 1M-token document runs in 8K segments. The writes run on
  // the engine's thread between segments; a reader that stops reading holds the engine only
  // once ~100 small messages fill the stream's window.
  const int64_t total = request->tokens_size();
  int64_t last_percent = -1;
  v1::PrecacheProgress message;
  message.set_tokens_total(static_cast<uint32_t>(total));
  auto progress = [&](int64_t done) {
    const int64_t percent = total > 0 ? done * 100 / total : 100;
    if (percent == last_percent || done >= total) return;  // the end comes with `done`
    last_percent = percent;
    message.set_tokens_done(static_cast<uint32_t>(done));
    writer->Write(message);
  };
  v1::PrecacheResponse response;
  grpc::Status st = RunPrecache(context, *request, progress, &response);
  if (!st.ok()) return st;
  message.set_tokens_done(static_cast<uint32_t>(total));
  *message.mutable_done() = std::move(response);
  writer->Write(message);
  return grpc::Status::OK;
}

grpc::Status PrefillService::RunPrecache(grpc::ServerContext* context,
                                         const v1::WorkerPrecacheRequest& request,
                                         const std::function<void(int64_t tokens_done)>& progress,
                                         v1::PrecacheResponse* response) {
  if (grpc::Status st = CheckTokens(request.tokens()); !st.ok()) return st;
  const std::vector<int32_t> document(request.tokens().begin(), request.tokens().end());
  SnapshotRetention retention;
  retention.pinned = request.pin();
  if (request.ttl_seconds() > 0) retention.ttl = absl::Seconds(request.ttl_seconds());
  auto result = worker_.Precache(
      document, request.cache_salt(), retention, [context] { return context->IsCancelled(); },
      progress, FromProto(request.scheduling()));
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_handle(result->snapshot.key.Hex());
  response->set_tokens(static_cast<uint32_t>(result->tokens));
  response->set_cached_tokens(static_cast<uint32_t>(result->snapshot.tokens));
  response->set_bytes(static_cast<uint64_t>(result->snapshot.bytes));
  response->set_worker(worker_id_);
  response->set_disk_error(result->snapshot.disk_error);
  return grpc::Status::OK;
}

grpc::Status PrefillService::ListCache(grpc::ServerContext* context,
                                       const v1::ListCacheRequest* request,
                                       v1::ListCacheResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.ListCache"); !st.ok()) return st;
  if (SnapshotStore* cache = worker_.cache()) {
    for (const SnapshotInfo& info :
         cache->List(SaltRoot(request->has_cache_salt(), request->cache_salt()))) {
      ToProto(info, worker_id_, response->add_entries());
    }
  }
  return grpc::Status::OK;
}

grpc::Status PrefillService::EvictCache(grpc::ServerContext* context,
                                        const v1::EvictCacheRequest* request,
                                        v1::EvictCacheResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.EvictCache"); !st.ok()) return st;
  SnapshotStore* cache = worker_.cache();
  if (cache == nullptr) return grpc::Status::OK;
  const std::optional<BlockKey> root = SaltRoot(request->has_cache_salt(), request->cache_salt());
  if (request->all()) {
    response->set_evicted(static_cast<uint32_t>(cache->EvictAll(root)));
    return grpc::Status::OK;
  }
  auto key = BlockKey::FromHex(request->handle());
  if (!key.ok()) return ToGrpcStatus(key.status());
  response->set_evicted(cache->Evict(*key, root) ? 1 : 0);
  return grpc::Status::OK;
}

grpc::Status PrefillService::WatchCache(grpc::ServerContext* context, const v1::WatchCacheRequest*,
                                        grpc::ServerWriter<v1::CacheEvent>* writer) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.WatchCache"); !st.ok()) return st;
  SnapshotStore* cache = worker_.cache();
  if (cache == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this prefill worker keeps no prefix cache (--cache-mb 0)");
  }
  // Polled: an idle store costs a lock per look, and the stream ends within a look of the
  // caller going away or the worker draining.
  SnapshotChanges changes(*cache);
  while (!context->IsCancelled() && !Draining()) {
    for (const CacheEvent& e : changes.Next()) {
      if (!writer->Write(ToProto(e))) return grpc::Status::OK;  // the caller went away
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return grpc::Status::OK;
}

std::optional<BlockKey> PrefillService::SaltRoot(bool has_salt, const std::string& salt) const {
  if (!has_salt) return std::nullopt;
  return PrefixRootKey(worker_.model().fingerprint(), salt);
}

grpc::Status PrefillService::CopySnapshot(grpc::ServerContext* context,
                                          const v1::CopySnapshotRequest* request,
                                          v1::CopySnapshotResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "PrefillWorker.CopySnapshot"); !st.ok()) {
    return st;
  }
  auto key = BlockKey::FromHex(request->handle());
  if (!key.ok()) return ToGrpcStatus(key.status());
  const absl::Duration timeout =
      request->timeout_ms() > 0 ? absl::Milliseconds(request->timeout_ms()) : kDefaultTransferWait;
  auto copied = worker_.CopySnapshot(*key, request->target_ucx_address(), timeout);
  if (!copied.ok()) return ToGrpcStatus(copied.status());
  response->set_bytes(copied->bytes);
  response->set_copy_ms(copied->copy_ms);
  return grpc::Status::OK;
}

}  // namespace yoco
