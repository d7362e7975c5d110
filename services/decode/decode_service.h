// DecodeService: the DecodeWorker gRPC service over a DecodeWorker. Each Decode call streams
// its sequence's tokens from the batching loop (DecodeStream); cancelling the call (the router's
// cancel or deadline) cancels the sequence, EndChoice one of its choices, and nothing else can.
// Every method answers only callers on the worker's allow-list (--allowed-callers).
#ifndef YOCO_SERVICES_DECODE_DECODE_SERVICE_H_
#define YOCO_SERVICES_DECODE_DECODE_SERVICE_H_

#include <string>

#include "lib/auth/caller_allow_list.h"
#include "lib/workers/decode_worker.h"
#include "services/decode/decode_calls.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

// Decode is on gRPC's callback API (DecodeStream); EndChoice and GetWorkerInfo are synchronous.
class DecodeService final
    : public v1::DecodeWorker::WithCallbackMethod_Decode<v1::DecodeWorker::Service> {
 public:
  // `backend` describes where the model runs, for GetWorkerInfo (DescribeBackend).
  DecodeService(DecodeWorker& worker, std::string worker_id, std::string backend = "cpu",
                CallerAllowList callers = {})
      : worker_(worker),
        worker_id_(std::move(worker_id)),
        backend_(std::move(backend)),
        callers_(std::move(callers)) {}

  grpc::ServerWriteReactor<v1::DecodeEvent>* Decode(grpc::CallbackServerContext* context,
                                                    const v1::DecodeRequest* request) override;
  grpc::Status EndChoice(grpc::ServerContext* context, const v1::EndChoiceRequest* request,
                         v1::EndChoiceResponse* response) override;
  grpc::Status GetWorkerInfo(grpc::ServerContext* context, const v1::GetWorkerInfoRequest* request,
                             v1::WorkerInfo* response) override;

 private:
  DecodeWorker& worker_;
  DecodeCalls calls_;
  const std::string worker_id_;
  const std::string backend_;
  const CallerAllowList callers_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_DECODE_DECODE_SERVICE_H_
