// The requests one Generate attempt sends to its workers, built from what the client asked and
// what was already sent: a retry continues the stream, so every request carries the prompt plus
// the tokens the client has and asks only for the tokens still to come.
#ifndef YOCO_SERVICES_ROUTER_WORKER_REQUESTS_H_
#define YOCO_SERVICES_ROUTER_WORKER_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "lib/model/sampling_params.h"
#include "yoco/v1/worker.pb.h"

namespace yoco {

// A choice still going (SamplingParams.n > 1) and what its client has of it.
struct ChoiceAsked {
  uint32_t choice = 0;
  absl::Span<const int32_t> sent;
  uint32_t still_to_come = 0;
};

struct AttemptRequest {
  std::string request_id;
  absl::Span<const int32_t> input;  // the prompt plus the tokens already sent
  uint32_t generated_tokens = 0;    // of those, the tokens already sent (input's last ones)
  SamplingParams sampling;
  uint32_t max_new_tokens = 0;  // still to come
  bool stop_at_eos = true;
  v1::Scheduling scheduling;  // where it waits at the workers
  // With choices (n > 1) the input is the prompt alone, none of it generated, each choice says
  // what was sent of it, and max_new_tokens is the request's (each choice's first included).
  std::vector<ChoiceAsked> choices;
};

// A prefill on a prefill worker that ships its state to the decode worker at `decode_ucx_address`
// (which already holds `decode_resident_blocks` of the prompt's blocks).
v1::PrefillRequest RemotePrefillRequest(const AttemptRequest& attempt, const std::string& salt,
                                        const std::string& decode_ucx_address,
                                        uint32_t decode_resident_blocks,
                                        uint32_t transfer_timeout_ms);

// A decode worker that prefills the input itself.
v1::DecodeRequest LocalDecodeRequest(const AttemptRequest& attempt);

// A decode worker that continues from the state `prefill` shipped to it (the prefill's first
// token is among those already sent, not in `attempt`): with the sampling, and the tokens so far
// that its adjustments depend on.
v1::DecodeRequest ShippedDecodeRequest(const AttemptRequest& attempt,
                                       const v1::PrefillResponse& prefill,
                                       uint32_t wait_for_bundle_ms);

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_WORKER_REQUESTS_H_
