// PrefillService: the PrefillWorker gRPC service over a PrefillWorker.
#ifndef YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_
#define YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_

#include <string>

#include "lib/workers/prefill_worker.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class PrefillService final : public v1::PrefillWorker::Service {
 public:
  PrefillService(PrefillWorker& worker, std::string worker_id)
      : worker_(worker), worker_id_(std::move(worker_id)) {}

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetWorkerInfo(grpc::ServerContext* context, const v1::GetWorkerInfoRequest* request,
                             v1::WorkerInfo* response) override;

 private:
  PrefillWorker& worker_;
  const std::string worker_id_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_PREFILL_PREFILL_SERVICE_H_
