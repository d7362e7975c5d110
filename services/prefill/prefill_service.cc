// Prefill RPCs.
#include "services/prefill/prefill_service.h"

#include "absl/strings/str_cat.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"

namespace yoco {

grpc::Status PrefillService::Prefill(grpc::ServerContext* context,
                                     const v1::PrefillRequest* request,
                                     v1::PrefillResponse* response) {
  const std::vector<int32_t> prompt(request->prompt().begin(), request->prompt().end());
  const int vocab = worker_.model().config().vocab_size;
  for (int32_t id : prompt) {
    if (id < 0 || id >= vocab) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const absl::Duration timeout = request->transfer_timeout_ms() > 0
                                     ? absl::Milliseconds(request->transfer_timeout_ms())
                                     : absl::Seconds(30);
  auto result = worker_.Prefill(prompt, FromProto(request->sampling()),
                                request->decode_ucx_address(), timeout);
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_first_token(result->first_token);
  response->set_bundle_bytes(result->bundle_bytes);
  response->set_prefill_ms(result->prefill_ms);
  response->set_transfer_ms(result->transfer_ms);
  response->set_transfer_id(result->transfer_id);
  response->set_sender_transport(result->sender);
  return grpc::Status::OK;
}

grpc::Status PrefillService::Cancel(grpc::ServerContext*, const v1::CancelRequest*,
                                    v1::CancelResponse* response) {
  // A prefill runs to completion within its RPC; cancelling the RPC is the way to stop it.
  response->set_found(false);
  return grpc::Status::OK;
}

grpc::Status PrefillService::GetWorkerInfo(grpc::ServerContext*, const v1::GetWorkerInfoRequest*,
                                           v1::WorkerInfo* response) {
  response->set_worker_id(worker_id_);
  response->set_ucx_address(worker_.transport().address());
  response->set_model_fingerprint(worker_.model().fingerprint());
  response->set_active_requests(static_cast<uint32_t>(worker_.transport().open_transfers()));
  return grpc::Status::OK;
}

}  // namespace yoco
