// DecodeService: the DecodeWorker gRPC service over a DecodeWorker. Each Decode call streams
// its sequence's tokens from the batching loop (DecodeStream); a cancelled call, or Cancel with
// its request id, cancels the sequence.
#ifndef YOCO_SERVICES_DECODE_DECODE_SERVICE_H_
#define YOCO_SERVICES_DECODE_DECODE_SERVICE_H_

#include <map>
#include <mutex>
#include <string>

#include "lib/workers/decode_worker.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

// Decode is on gRPC's callback API (DecodeStream); Cancel and GetWorkerInfo are synchronous.
class DecodeService final
    : public v1::DecodeWorker::WithCallbackMethod_Decode<v1::DecodeWorker::Service> {
 public:
  // `backend` describes where the model runs, for GetWorkerInfo (DescribeBackend).
  DecodeService(DecodeWorker& worker, std::string worker_id, std::string backend = "cpu")
      : worker_(worker), worker_id_(std::move(worker_id)), backend_(std::move(backend)) {}

  grpc::ServerWriteReactor<v1::DecodeEvent>* Decode(grpc::CallbackServerContext* context,
                                                    const v1::DecodeRequest* request) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetWorkerInfo(grpc::ServerContext* context, const v1::GetWorkerInfoRequest* request,
                             v1::WorkerInfo* response) override;

  // The running sequences by request id, for Cancel.
  void Register(const std::string& request_id, uint64_t sequence);
  void Unregister(const std::string& request_id, uint64_t sequence);

 private:
  DecodeWorker& worker_;
  const std::string worker_id_;
  const std::string backend_;
  std::mutex mu_;
  std::multimap<std::string, uint64_t> running_;  // request id -> batcher sequence id
};

}  // namespace yoco

#endif  // YOCO_SERVICES_DECODE_DECODE_SERVICE_H_
