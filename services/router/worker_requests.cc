// Request builders: pure functions of the attempt, so the router's stream only sends them.
#include "services/router/worker_requests.h"

#include "lib/rpc/proto_convert.h"

namespace yoco {

v1::PrefillRequest RemotePrefillRequest(const AttemptRequest& attempt, const std::string& salt,
                                        const std::string& decode_ucx_address,
                                        uint32_t decode_resident_blocks,
                                        uint32_t transfer_timeout_ms) {
  v1::PrefillRequest req;
  req.set_request_id(attempt.request_id);
  req.mutable_prompt()->Add(attempt.input.begin(), attempt.input.end());
  req.set_cache_salt(salt);
  ToProto(attempt.sampling, req.mutable_sampling());
  req.set_decode_ucx_address(decode_ucx_address);
  req.set_transfer_timeout_ms(transfer_timeout_ms);
  req.set_max_new_tokens(attempt.max_new_tokens);
  req.set_stop_at_eos(attempt.stop_at_eos);
  *req.mutable_scheduling() = attempt.scheduling;
  req.set_decode_resident_blocks(decode_resident_blocks);
  return req;
}

v1::DecodeRequest LocalDecodeRequest(const AttemptRequest& attempt) {
  v1::DecodeRequest req;
  req.set_request_id(attempt.request_id);
  req.mutable_prompt()->Add(attempt.input.begin(), attempt.input.end());
  ToProto(attempt.sampling, req.mutable_sampling());
  req.set_max_new_tokens(attempt.max_new_tokens);
  req.set_stop_at_eos(attempt.stop_at_eos);
  *req.mutable_scheduling() = attempt.scheduling;
  return req;
}

v1::DecodeRequest ShippedDecodeRequest(const AttemptRequest& attempt,
                                       const v1::PrefillResponse& prefill,
                                       uint32_t wait_for_bundle_ms) {
  v1::DecodeRequest req;
  req.set_request_id(attempt.request_id);
  req.set_sender_transport(prefill.sender_transport());
  req.set_transfer_id(prefill.transfer_id());
  req.set_max_new_tokens(attempt.max_new_tokens);
  req.set_wait_for_bundle_ms(wait_for_bundle_ms);
  req.set_stop_at_eos(attempt.stop_at_eos);
  *req.mutable_scheduling() = attempt.scheduling;
  // The bundle carries the sampling, but not which logprobs to report.
  if (attempt.sampling.logprobs >= 0) {
    req.mutable_sampling()->set_logprobs(static_cast<uint32_t>(attempt.sampling.logprobs));
  }
  return req;
}

}  // namespace yoco
