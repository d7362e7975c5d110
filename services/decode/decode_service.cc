// The decode worker's RPCs: Decode's stream (DecodeStream) behind the allow-list, and the
// worker's load report.
#include "services/decode/decode_service.h"

#include <algorithm>

#include "services/decode/decode_stream.h"

namespace yoco {
namespace {

// A Decode call refused before it reached the worker.
class RefusedDecode final : public grpc::ServerWriteReactor<v1::DecodeEvent> {
 public:
  explicit RefusedDecode(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeService::Decode(
    grpc::CallbackServerContext* context, const v1::DecodeRequest* request) {
  if (grpc::Status st = callers_.Check(*context, "DecodeWorker.Decode"); !st.ok()) {
    return new RefusedDecode(st);
  }
  return new DecodeStream(worker_, calls_, context, request);
}

grpc::Status DecodeService::EndChoice(grpc::ServerContext* context,
                                      const v1::EndChoiceRequest* request,
                                      v1::EndChoiceResponse* response) {
  if (grpc::Status st = callers_.Check(*context, "DecodeWorker.EndChoice"); !st.ok()) return st;
  response->set_found(calls_.EndChoice(request->call_id(), request->choice()));
  return grpc::Status::OK;
}

grpc::Status DecodeService::GetWorkerInfo(grpc::ServerContext* context,
                                          const v1::GetWorkerInfoRequest*,
                                          v1::WorkerInfo* response) {
  if (grpc::Status st = callers_.Check(*context, "DecodeWorker.GetWorkerInfo"); !st.ok()) {
    return st;
  }
  const DecodeBatcherStats stats = worker_.stats();
  response->set_worker_id(worker_id_);
  response->set_backend(backend_);
  response->set_local_prefill(worker_.local_prefill());
  response->set_ucx_address(worker_.address());
  response->set_reads_traced_transfers(true);  // DecodeWorker records yoco.bundle.receive
  response->set_model_fingerprint(worker_.fingerprint());
  response->set_vocabulary_fingerprint(worker_.vocabulary_fingerprint());
  response->set_active_requests(stats.active);
  response->set_queued_requests(stats.queued);
  response->set_used_memory_bytes(stats.memory_in_use_bytes);
  response->set_free_memory_bytes(static_cast<uint64_t>(
      std::max<int64_t>(stats.memory_budget_bytes - stats.memory_in_use_bytes, 0)));
  response->set_max_sequence_rows(static_cast<uint64_t>(worker_.max_sequence_rows()));
  return grpc::Status::OK;
}

}  // namespace yoco
