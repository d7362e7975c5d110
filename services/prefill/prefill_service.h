// PrefillService: the PrefillWorker gRPC service over a PrefillWorker. A prefill stops when its
// call is cancelled (the router's cancel or deadline): only the call that asked for it can stop
// it. Every method answers only callers on the worker's allow-list (--allowed-callers).
#ifndef YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_
#define YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "lib/auth/caller_allow_list.h"
#include "lib/workers/prefill_worker.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class PrefillService final : public v1::PrefillWorker::Service {
 public:
  // `backend` describes where the model runs, for GetWorkerInfo (DescribeBackend).
  PrefillService(PrefillWorker& worker, std::string worker_id, std::string backend = "cpu",
                 CallerAllowList callers = {})
      : worker_(worker),
        worker_id_(std::move(worker_id)),
        backend_(std::move(backend)),
        callers_(std::move(callers)) {}

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status PrefillStream(grpc::ServerContext* context, const v1::PrefillRequest* request,
                             grpc::ServerWriter<v1::PrefillResponse>* writer) override;
  grpc::Status GetWorkerInfo(grpc::ServerContext* context, const v1::GetWorkerInfoRequest* request,
                             v1::WorkerInfo* response) override;
  grpc::Status Precache(grpc::ServerContext* context, const v1::WorkerPrecacheRequest* request,
                        v1::PrecacheResponse* response) override;
  grpc::Status PrecacheWithProgress(grpc::ServerContext* context,
                                    const v1::WorkerPrecacheRequest* request,
                                    grpc::ServerWriter<v1::PrecacheProgress>* writer) override;
  grpc::Status ListCache(grpc::ServerContext* context, const v1::ListCacheRequest* request,
                         v1::ListCacheResponse* response) override;
  grpc::Status EvictCache(grpc::ServerContext* context, const v1::EvictCacheRequest* request,
                          v1::EvictCacheResponse* response) override;
  grpc::Status WatchCache(grpc::ServerContext* context, const v1::WatchCacheRequest* request,
                          grpc::ServerWriter<v1::CacheEvent>* writer) override;
  grpc::Status CopySnapshot(grpc::ServerContext* context, const v1::CopySnapshotRequest* request,
                            v1::CopySnapshotResponse* response) override;
  grpc::Status Score(grpc::ServerContext* context, const v1::WorkerScoreRequest* request,
                     v1::ScoreResponse* response) override;

  // For metrics: prefills running or waiting for the engine, and prefills stopped by a cancel.
  size_t active_requests() const { return active_.load(); }
  uint64_t cancelled_requests() const { return cancelled_.load(); }

 private:
  // Prefill and PrefillStream: `first_token` (may be null) gets the first-token message when a
  // bundle will ship, before it goes.
  grpc::Status TracedPrefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                             v1::PrefillResponse* response,
                             const std::function<void(const v1::PrefillResponse&)>& first_token);
  // The same without its span.
  // `span`: the call's, which the bundle transfer carries when the request asks for it.
  grpc::Status RunPrefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                          const TraceContext& span, v1::PrefillResponse* response,
                          const std::function<void(const v1::PrefillResponse&)>& first_token);
  grpc::Status CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens) const;
  // Precache and PrecacheWithProgress: `progress` may be null.
  grpc::Status RunPrecache(grpc::ServerContext* context, const v1::WorkerPrecacheRequest& request,
                           const std::function<void(int64_t tokens_done)>& progress,
                           v1::PrecacheResponse* response);
  // ListCache / EvictCache's salt filter: the salt's chain root, or none (every snapshot).
  std::optional<BlockKey> SaltRoot(bool has_salt, const std::string& salt) const;

  PrefillWorker& worker_;
  const std::string worker_id_;
  const std::string backend_;
  const CallerAllowList callers_;
  std::atomic<size_t> active_{0};
  std::atomic<uint64_t> cancelled_{0};
};

}  // namespace yoco

#endif  // YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_
