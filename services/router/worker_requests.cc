// Request builders: pure functions of the attempt, so the router's stream only sends them.
#include "services/router/worker_requests.h"

#include <algorithm>
#include <vector>

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
  req.set_generated_tokens(attempt.generated_tokens);
  for (const ChoiceAsked& c : attempt.choices) req.add_choices(c.choice);
  return req;
}

namespace {

// The choices' DecodeChoice: what each has sent (after a shipped prefill, its first token).
void AddChoices(const AttemptRequest& attempt, v1::DecodeRequest* req) {
  for (const ChoiceAsked& c : attempt.choices) {
    v1::DecodeChoice* choice = req->add_choices();
    choice->set_choice(c.choice);
    choice->mutable_sent()->Add(c.sent.begin(), c.sent.end());
    choice->set_max_new_tokens(c.still_to_come);
  }
}

}  // namespace

v1::DecodeRequest LocalDecodeRequest(const AttemptRequest& attempt) {
  v1::DecodeRequest req;
  req.set_request_id(attempt.request_id);
  req.mutable_prompt()->Add(attempt.input.begin(), attempt.input.end());
  ToProto(attempt.sampling, req.mutable_sampling());
  req.set_max_new_tokens(attempt.max_new_tokens);
  req.set_stop_at_eos(attempt.stop_at_eos);
  *req.mutable_scheduling() = attempt.scheduling;
  req.set_generated_tokens(attempt.generated_tokens);
  AddChoices(attempt, &req);
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
  // The bundle's sampling lacks logprobs and the logit adjustments, and it has no history.
  ToProto(attempt.sampling, req.mutable_sampling());
  AddChoices(attempt, &req);
  // The adjustments and a structured-output rule depend on the tokens so far.
  if (attempt.sampling.AdjustsLogits() || attempt.sampling.Constrained()) {
    const size_t prompt = attempt.input.size() - attempt.generated_tokens;
    if (attempt.choices.empty()) {  // choices carry their own
      req.mutable_generated()->Add(attempt.input.begin() + prompt, attempt.input.end());
      req.add_generated(prefill.first_token());
    }
    if (attempt.sampling.repetition_penalty != 1.0f) {
      std::vector<int32_t> ids(attempt.input.begin(), attempt.input.begin() + prompt);
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      req.mutable_prompt_ids()->Add(ids.begin(), ids.end());
    }
  }
  return req;
}

}  // namespace yoco
