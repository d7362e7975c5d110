// The decode worker's RPCs besides Decode's stream (DecodeStream): Cancel by request id and the
// worker's load report.
#include "services/decode/decode_service.h"

#include <algorithm>
#include <mutex>

#include "services/decode/decode_stream.h"

namespace yoco {

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeService::Decode(
    grpc::CallbackServerContext* context, const v1::DecodeRequest* request) {
  return new DecodeStream(*this, worker_, context, request);
}

void DecodeService::Register(const std::string& request_id, uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.emplace(request_id, sequence);
}

void DecodeService::Unregister(const std::string& request_id, uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = running_.equal_range(request_id);
  for (auto it = begin; it != end; ++it) {
    if (it->second == sequence) {
      running_.erase(it);
      return;
    }
  }
}

grpc::Status DecodeService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = running_.equal_range(request->request_id());
  for (auto it = begin; it != end; ++it) worker_.Cancel(it->second);
  response->set_found(begin != end);
  return grpc::Status::OK;
}

grpc::Status DecodeService::GetWorkerInfo(grpc::ServerContext*, const v1::GetWorkerInfoRequest*,
                                          v1::WorkerInfo* response) {
  const DecodeBatcherStats stats = worker_.stats();
  response->set_worker_id(worker_id_);
  response->set_backend(backend_);
  response->set_local_prefill(worker_.local_prefill());
  response->set_ucx_address(worker_.address());
  response->set_model_fingerprint(worker_.fingerprint());
  response->set_active_requests(stats.active);
  response->set_queued_requests(stats.queued);
  response->set_used_memory_bytes(stats.memory_in_use_bytes);
  response->set_free_memory_bytes(static_cast<uint64_t>(
      std::max<int64_t>(stats.memory_budget_bytes - stats.memory_in_use_bytes, 0)));
  return grpc::Status::OK;
}

}  // namespace yoco
