// The checks every public request passes before the router does any work for it: a prompt of
// token ids or text that fits the model, sampling settings the engine accepts, bounded stop
// strings and lengths. Kept apart from the RPC plumbing so that they can be fuzzed on raw
// request bytes and shared by every front end (gRPC today).
#ifndef YOCO_SERVICES_ROUTER_REQUEST_CHECKS_H_
#define YOCO_SERVICES_ROUTER_REQUEST_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/model_config.h"
#include "lib/model/sampling_params.h"
#include "lib/rpc/invalid_field.h"
#include "lib/text/tokenizer.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr uint32_t kMaxNewTokensLimit = 1u << 20;

// A GenerateRequest, checked.
struct CheckedGenerateRequest {
  std::vector<int32_t> prompt;  // text prompts start with BOS
  SamplingParams sampling;
  uint32_t max_new_tokens = 0;  // the request's, or the default for 0
  bool stop_at_eos = false;
  std::vector<std::string> stop_strings;
  std::optional<int32_t> priority;  // none: the tenant's default
  uint32_t choices = 1;             // SamplingParams.n: samples of the prompt, 1 to kMaxChoices
};

// The request field a refusal is about ("" when not one field): the router sends it to the
// client in kInvalidFieldMetadata.
std::string InvalidField(const absl::Status& status);

inline constexpr size_t kMaxRequestIdBytes = 128;

// A client's request id goes into logs, gRPC metadata and HTTP headers: empty (the router makes
// one) or 1-128 printable ASCII characters; INVALID_ARGUMENT (field request_id) otherwise.
absl::Status CheckRequestId(const std::string& request_id);
// An id for a request whose client sent none ("req-" and 16 hex digits).
std::string NewRequestId();

// INVALID_ARGUMENT naming the problem (and the field, InvalidField): an empty prompt, a token
// outside the vocabulary, a text the tokenizer refuses (it must be UTF-8), bad sampling settings,
// too many or too long stop strings, an absurd max_new_tokens, a priority outside
// [-kMaxSchedulingPriority, kMaxSchedulingPriority], or a prompt + max_new_tokens beyond
// max_seq_len (with both lengths in the message).
absl::StatusOr<CheckedGenerateRequest> CheckGenerateRequest(const v1::GenerateRequest& request,
                                                            const ModelConfig& config,
                                                            const Tokenizer& tokenizer,
                                                            uint32_t default_max_new_tokens);

// A ScoreRequest's prompt, checked as a Generate prompt is (it must fit max_seq_len), and its
// top_logprobs (field "top_logprobs").
absl::StatusOr<std::vector<int32_t>> CheckScoreRequest(const v1::ScoreRequest& request,
                                                       const ModelConfig& config,
                                                       const Tokenizer& tokenizer);

// A PrecacheRequest's document, checked the same way (it must fit max_seq_len).
absl::StatusOr<std::vector<int32_t>> CheckPrecacheRequest(const v1::PrecacheRequest& request,
                                                          const ModelConfig& config,
                                                          const Tokenizer& tokenizer);

// RESOURCE_EXHAUSTED, naming the numbers and the flag, when a sequence of `input` tokens with
// `still_to_come` more needs more K/V rows than the largest decode worker's state budget holds
// (`longest_rows`; 0: unknown, nothing is refused). The last token is never fed back, so it
// needs no row.
absl::Status CheckFitsDecodeWorker(uint64_t input, uint64_t still_to_come, uint64_t longest_rows);

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_REQUEST_CHECKS_H_
