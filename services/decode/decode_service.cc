// Decode RPCs. The batching thread hands events to the RPC thread through a small queue, so a
// slow client never stalls the batch.
#include "services/decode/decode_service.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>

#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"

namespace yoco {
namespace {

v1::FinishReason ToProto(DecodeFinish reason) {
  switch (reason) {
    case DecodeFinish::kLength:
      return v1::FINISH_REASON_LENGTH;
    case DecodeFinish::kStop:
      return v1::FINISH_REASON_STOP;
    case DecodeFinish::kEos:
      return v1::FINISH_REASON_EOS;
    case DecodeFinish::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case DecodeFinish::kError:
      return v1::FINISH_REASON_UNSPECIFIED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

struct EventQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<DecodeEvent> events;
};

}  // namespace

grpc::Status DecodeService::Decode(grpc::ServerContext* context, const v1::DecodeRequest* request,
                                   grpc::ServerWriter<v1::DecodeEvent>* writer) {
  if (request->max_new_tokens() < 1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_new_tokens must be >= 1");
  }
  auto queue = std::make_shared<EventQueue>();
  auto on_event = [queue](const DecodeEvent& e) {
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->events.push_back(e);
    queue->cv.notify_all();
  };
  auto cancelled = [context] { return context->IsCancelled(); };
  const int max_new_tokens = static_cast<int>(
      std::min<uint32_t>(request->max_new_tokens(), std::numeric_limits<int>::max()));
  absl::StatusOr<uint64_t> id;
  if (request->prompt_size() > 0) {
    LocalPrefillCall call;
    call.prompt.assign(request->prompt().begin(), request->prompt().end());
    call.sampling = FromProto(request->sampling());
    call.max_new_tokens = max_new_tokens;
    call.stop_at_eos = request->stop_at_eos();
    id = worker_.PrefillAndDecode(call, on_event, cancelled);
  } else {
    const absl::Duration wait = request->wait_for_bundle_ms() > 0
                                    ? absl::Milliseconds(request->wait_for_bundle_ms())
                                    : absl::Seconds(30);
    id = worker_.Decode(request->sender_transport(), request->transfer_id(), max_new_tokens,
                        request->stop_at_eos(), wait, on_event, cancelled);
  }
  if (!id.ok()) return ToGrpcStatus(id.status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.emplace(request->request_id(), *id);
  }
  struct Unregister {
    DecodeService* service;
    std::multimap<std::string, uint64_t>::value_type entry;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(service->mu_);
      auto [begin, end] = service->running_.equal_range(entry.first);
      for (auto it = begin; it != end; ++it) {
        if (it->second == entry.second) {
          service->running_.erase(it);
          break;
        }
      }
    }
  } unregister{this, {request->request_id(), *id}};
  uint32_t index = 0;
  while (true) {
    DecodeEvent e;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      while (queue->events.empty()) {
        if (context->IsCancelled()) {
          if (*id != 0) worker_.Cancel(*id);
          return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
        }
        queue->cv.wait_for(lock, std::chrono::milliseconds(50));
      }
      e = queue->events.front();
      queue->events.pop_front();
    }
    v1::DecodeEvent out;
    if (e.finished) {
      if (e.reason == DecodeFinish::kError) return ToGrpcStatus(e.status);
      out.mutable_finish()->set_reason(ToProto(e.reason));
      out.mutable_finish()->mutable_usage()->set_generated_tokens(e.generated);
      writer->Write(out);
      return grpc::Status::OK;
    }
    out.mutable_token()->set_id(e.token);
    out.mutable_token()->set_index(index++);
    if (!writer->Write(out)) {  // the client is gone
      if (*id != 0) worker_.Cancel(*id);
      return grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed");
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
