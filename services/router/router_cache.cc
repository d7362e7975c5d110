// RouterService's prefix-cache side: the public Precache / ListCache / EvictCache / WatchCache RPCs
// and the background work that keeps snapshots where requests will want them (copies of hot
// snapshots to less loaded workers, conversation snapshots after a request).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/log/log.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/scheduling/scheduling_class.h"
#include "services/router/request_checks.h"
#include "services/router/router_service.h"

namespace yoco {
namespace {

// A call to a worker on behalf of a client: the client's deadline, but never more than `cap`, so
// one stuck worker cannot hold a listing or an eviction forever.
std::unique_ptr<grpc::ClientContext> WorkerCall(const grpc::ServerContext& client,
                                                std::chrono::seconds cap) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::min(client.deadline(), std::chrono::system_clock::now() + cap));
  return ctx;
}

}  // namespace

grpc::Status RouterService::Precache(grpc::ServerContext* context,
                                     const v1::PrecacheRequest* request,
                                     v1::PrecacheResponse* response) {
  return RunPrecache(context, *request, nullptr, response);
}

grpc::Status RouterService::PrecacheWithProgress(grpc::ServerContext* context,
                                                 const v1::PrecacheRequest* request,
                                                 grpc::ServerWriter<v1::PrecacheProgress>* writer) {
  v1::PrecacheResponse response;
  grpc::Status st = RunPrecache(
      context, *request, [writer](const v1::PrecacheProgress& p) { writer->Write(p); }, &response);
  if (!st.ok()) return st;
  v1::PrecacheProgress last;
  last.set_tokens_total(response.tokens());
  last.set_tokens_done(response.tokens());
  *last.mutable_done() = std::move(response);
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status RouterService::RunPrecache(
    grpc::ServerContext* context, const v1::PrecacheRequest& request,
    const std::function<void(const v1::PrecacheProgress&)>& progress,
    v1::PrecacheResponse* response) {
  absl::StatusOr<CallScope> scope =
      Scope(*context, !request.cache_salt().empty(), request.cache_salt());
  if (!scope.ok()) return ToGrpcStatus(scope.status());
  absl::StatusOr<std::vector<int32_t>> checked =
      CheckPrecacheRequest(request, config_, *tokenizer_);
  if (!checked.ok()) return ToGrpcStatus(checked.status());
  const std::vector<int32_t>& document = *checked;
  // A pin under the tenant's max_pinned_snapshot_bytes: refused before any work when the tenant
  // is at its limit already, undone (the new snapshot evicted) when this one passed it.
  const uint64_t pin_limit = request.pin() && options_.tenants != nullptr && !scope->tenant.empty()
                                 ? options_.tenants->Limits(scope->tenant).max_pinned_snapshot_bytes
                                 : 0;
  std::map<std::string, uint64_t> pinned;
  uint64_t pinned_bytes = 0;
  if (pin_limit > 0) {
    pinned = PinnedSnapshots(*context, scope->salt);
    for (const auto& [handle, bytes] : pinned) pinned_bytes += bytes;
    if (pinned_bytes >= pin_limit) return RefusePin(scope->tenant, pinned_bytes, 0, pin_limit);
  }
  // Prefer the worker that already holds most of the document.
  const std::vector<BlockKey> keys = UsableKeys(scope->salt, document);
  const WorkerQuery query{.keys = keys,
                          .prompt_tokens = static_cast<int64_t>(document.size()),
                          .load_penalty_tokens = options_.cache_load_penalty_tokens};
  std::optional<WorkerChoice> choice = prefill_workers_->Choose(query);
  if (!choice.has_value()) {  // a synchronous handler may wait on the probes: maybe just up
    prefill_workers_->ProbeAll();
    choice = prefill_workers_->Choose(query);
  }
  if (!choice.has_value()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no healthy prefill worker");
  }
  v1::WorkerPrecacheRequest req;
  req.mutable_tokens()->Add(document.begin(), document.end());
  req.set_pin(request.pin());
  req.set_ttl_seconds(request.ttl_seconds());
  req.set_cache_salt(scope->salt);
  grpc::Status st;
  {
    WorkerRegistry::InFlight in_flight(*prefill_workers_, choice->index);
    bool asked = false;
    if (progress) {
      std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
      std::unique_ptr<grpc::ClientReader<v1::PrecacheProgress>> reader =
          prefill_stubs_[choice->index]->PrecacheWithProgress(ctx.get(), req);
      v1::PrecacheProgress message;
      bool any = false;
      while (reader->Read(&message)) {
        any = true;
        if (message.has_done()) {
          *response = message.done();
        } else {
          progress(message);
        }
      }
      st = reader->Finish();
      // A worker of an older version has no streaming method: ask it the plain way.
      asked = !(st.error_code() == grpc::StatusCode::UNIMPLEMENTED && !any);
    }
    if (!asked) {
      std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
      st = prefill_stubs_[choice->index]->Precache(ctx.get(), req, response);
    }
  }
  if (!st.ok()) return st;
  if (pin_limit > 0 && pinned.count(response->handle()) == 0 &&
      pinned_bytes + response->bytes() > pin_limit) {
    // Pins cannot be taken back but snapshots can be evicted (a cached copy of the document
    // that was there unpinned goes too: it is recomputed when asked for).
    v1::EvictCacheRequest evict;
    evict.set_handle(response->handle());
    evict.set_cache_salt(scope->salt);
    v1::EvictCacheResponse evicted;
    std::unique_ptr<grpc::ClientContext> ctx = WorkerCall(*context, std::chrono::seconds(10));
    const grpc::Status undone =
        prefill_stubs_[choice->index]->EvictCache(ctx.get(), evict, &evicted);
    prefill_workers_->Probe(choice->index);
    if (!undone.ok() || evicted.evicted() == 0) {
      LogWarning("a pin over its tenant's limit could not be undone")
          .With("tenant", scope->tenant)
          .With("handle", response->handle())
          .With("error", undone.error_message());
    }
    return RefusePin(scope->tenant, pinned_bytes, response->bytes(), pin_limit);
  }
  response->set_worker(prefill_workers_->address(choice->index));
  prefill_workers_->Probe(choice->index);  // so the next prompt is routed to the snapshot
  return grpc::Status::OK;
}

std::map<std::string, uint64_t> RouterService::PinnedSnapshots(const grpc::ServerContext& context,
                                                               const std::string& salt) {
  v1::ListCacheRequest request;
  request.set_cache_salt(salt);
  std::map<std::string, uint64_t> pinned;
  for (size_t i : prefill_workers_->HealthyWorkers()) {
    std::unique_ptr<grpc::ClientContext> ctx = WorkerCall(context, std::chrono::seconds(10));
    v1::ListCacheResponse listed;
    if (!prefill_stubs_[i]->ListCache(ctx.get(), request, &listed).ok()) continue;
    for (const v1::CacheEntry& e : listed.entries()) {
      if (e.pinned()) pinned[e.handle()] = e.bytes();
    }
  }
  return pinned;
}

grpc::Status RouterService::RefusePin(const std::string& tenant, uint64_t pinned, uint64_t adding,
                                      uint64_t limit) {
  metrics_->tenant_limit_refusals.Add({{"tenant", tenant}, {"limit", "max_pinned_snapshot_bytes"}})
      .Increment();
  const std::string what =
      adding == 0 ? absl::StrCat("tenant ", tenant, " holds ", pinned, " bytes of pinned snapshots")
                  : absl::StrCat("pinning this document (", adding, " bytes) would take tenant ",
                                 tenant, "'s pinned snapshots to ", pinned + adding, " bytes");
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat(what, ", at or over its max_pinned_snapshot_bytes of ", limit,
                                   ": evict a pinned document first (EvictCache), or pre-cache "
                                   "without pin"));
}

grpc::Status RouterService::ListCache(grpc::ServerContext* context,
                                      const v1::ListCacheRequest* request,
                                      v1::ListCacheResponse* response) {
  absl::StatusOr<CallScope> scope =
      Scope(*context, request->has_cache_salt(), request->cache_salt());
  if (!scope.ok()) return ToGrpcStatus(scope.status());
  v1::ListCacheRequest req = *request;
  if (!scope->tenant.empty()) req.set_cache_salt(scope->salt);
  for (size_t i : prefill_workers_->HealthyWorkers()) {
    std::unique_ptr<grpc::ClientContext> ctx = WorkerCall(*context, std::chrono::seconds(10));
    v1::ListCacheResponse part;
    if (!prefill_stubs_[i]->ListCache(ctx.get(), req, &part).ok()) continue;
    for (v1::CacheEntry& e : *part.mutable_entries()) {
      e.set_worker(prefill_workers_->address(i));
      *response->add_entries() = std::move(e);
    }
  }
  return grpc::Status::OK;
}

grpc::Status RouterService::EvictCache(grpc::ServerContext* context,
                                       const v1::EvictCacheRequest* request,
                                       v1::EvictCacheResponse* response) {
  absl::StatusOr<CallScope> scope =
      Scope(*context, request->has_cache_salt(), request->cache_salt());
  if (!scope.ok()) return ToGrpcStatus(scope.status());
  if (!request->all()) {
    if (auto key = BlockKey::FromHex(request->handle()); !key.ok())
      return ToGrpcStatus(key.status());
  }
  v1::EvictCacheRequest req = *request;
  if (!scope->tenant.empty()) req.set_cache_salt(scope->salt);
  for (size_t i : prefill_workers_->HealthyWorkers()) {
    std::unique_ptr<grpc::ClientContext> ctx = WorkerCall(*context, std::chrono::seconds(10));
    v1::EvictCacheResponse part;
    if (prefill_stubs_[i]->EvictCache(ctx.get(), req, &part).ok()) {
      response->set_evicted(response->evicted() + part.evicted());
    }
    prefill_workers_->Probe(i);
  }
  // A tenant cannot tell another tenant's handle from one that never existed.
  if (!scope->tenant.empty() && !request->all() && response->evicted() == 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no snapshot ", request->handle(), " of this tenant"));
  }
  return grpc::Status::OK;
}

void RouterService::CopySnapshotLater(const WorkerChoice& choice,
                                      const std::vector<BlockKey>& keys) {
  // A hot snapshot whose holder is busy: this request is served without it, later ones by the
  // chosen worker too once it has a copy.
  const BlockKey key = keys[choice.better_cached_tokens / kCacheBlockTokens - 1];
  const size_t holder = *choice.better_holder, target = choice.index;
  {
    absl::MutexLock lock(&copies_mu_);
    if (!copies_.insert({key, target}).second) return;  // already on its way
  }
  const std::string target_address = choice.info.ucx_address();
  const bool posted = background_.Post([this, key, holder, target, target_address] {
    v1::CopySnapshotRequest req;
    req.set_handle(key.Hex());
    req.set_target_ucx_address(target_address);
    req.set_timeout_ms(options_.transfer_timeout_ms);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(options_.transfer_timeout_ms + 5000));
    v1::CopySnapshotResponse response;
    const grpc::Status st = prefill_stubs_[holder]->CopySnapshot(&ctx, req, &response);
    if (st.ok()) {
      metrics_->snapshot_copies.Increment();
      prefill_workers_->Probe(target);
    } else {
      LogWarning("copying a snapshot failed")
          .With("key", key.Hex())
          .With("from", prefill_workers_->address(holder))
          .With("to", prefill_workers_->address(target))
          .With("error", st.error_message());
    }
    absl::MutexLock lock(&copies_mu_);
    copies_.erase({key, target});
  });
  if (!posted) {
    absl::MutexLock lock(&copies_mu_);
    copies_.erase({key, target});
  }
}

void RouterService::SnapshotConversation(size_t prefill_index, size_t prompt_tokens,
                                         std::vector<int32_t> tokens, const std::string& salt,
                                         const v1::Scheduling& scheduling) {
  // Worth it only when the generated tokens complete a block the prompt's snapshot lacks.
  const size_t B = static_cast<size_t>(kCacheBlockTokens);
  if (tokens.size() / B <= (prompt_tokens - 1) / B) return;
  v1::Scheduling background = scheduling;
  background.set_priority(kBackgroundPriority);
  auto job = [this, prefill_index, salt, background, tokens = std::move(tokens)] {
    v1::WorkerPrecacheRequest req;
    req.mutable_tokens()->Add(tokens.begin(), tokens.end());
    req.set_cache_salt(salt);
    *req.mutable_scheduling() = background;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::PrecacheResponse response;
    WorkerRegistry::InFlight in_flight(*prefill_workers_, prefill_index);
    if (prefill_stubs_[prefill_index]->Precache(&ctx, req, &response).ok()) {
      prefill_workers_->Probe(prefill_index);  // so the follow-up is routed to it
    }
  };
  if (!background_.Post(std::move(job))) metrics_->conversation_snapshots_dropped.Increment();
}

grpc::Status RouterService::WatchCache(grpc::ServerContext* context, const v1::WatchCacheRequest*,
                                       grpc::ServerWriter<v1::CacheEvent>* writer) {
  if (options_.tenants != nullptr) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "WatchCache shows every tenant's snapshots: not served under --tenants");
  }
  // The placement now, then what changes from here (an event may come in both: harmless).
  uint64_t next = cache_events_.end();
  auto write = [writer](const CacheEvent& e) { return writer->Write(ToProto(e)); };
  for (const CacheEvent& e : prefill_workers_->Placement()) {
    if (!write(e)) return grpc::Status::OK;  // the caller went away
  }
  // Wakes at least every half second to notice a cancelled call or a drain.
  while (!context->IsCancelled() && !Draining()) {
    CacheEventLog::Batch batch = cache_events_.Read(next, 256, absl::Milliseconds(500));
    next = batch.next;
    if (batch.missed) {
      v1::CacheEvent resync;
      resync.set_kind(v1::CacheEvent::RESYNC);
      resync.set_unix_ms(absl::ToUnixMillis(absl::Now()));
      if (!writer->Write(resync)) break;
    }
    for (const CacheEvent& e : batch.events) {
      if (!write(e)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

}  // namespace yoco
