// ChoiceSet: the choices of one Generate request (SamplingParams.n; one without it): what was
// sent of each, which have ended and why, and what a decode worker is asked to go on with. The
// worker ends a choice at its length and stop ids; the router ends it at a stop string, which
// only the text shows, and at a local prefill's first token, whose end the worker reports too
// late to keep the client from waiting for it.
#ifndef YOCO_SERVICES_ROUTER_CHOICE_SET_H_
#define YOCO_SERVICES_ROUTER_CHOICE_SET_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/text/tokenizer.h"
#include "services/router/request_checks.h"
#include "services/router/sent_tokens.h"
#include "services/router/worker_requests.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

class ChoiceSet {
 public:
  ChoiceSet() = default;
  // `call` and `tokenizer` outlive this object; `start` is when the request came.
  ChoiceSet(const CheckedGenerateRequest& call, const Tokenizer& tokenizer,
            SentTokens::Clock::time_point start);

  size_t size() const { return choices_.size(); }
  bool multi() const { return choices_.size() > 1; }
  SentTokens& sent(uint32_t c) { return choices_[c].sent; }
  const SentTokens& sent(uint32_t c) const { return choices_[c].sent; }
  bool ended(uint32_t c) const { return choices_[c].end.has_value(); }
  bool AllEnded() const;

  // A decode worker finished choice `c` with `reason`; a stop string may have ended it first,
  // and a worker's CANCELLED (or no reason) ends nothing.
  void WorkerFinished(uint32_t c, v1::FinishReason reason);
  // `id`, a prefill's token of choice `c`, went to the client: the choice ends if `id` ends it
  // (a stop token, EOS, a stop string, the length).
  void EndIfItEndsAt(uint32_t c, int32_t id);
  // `id`, a decode worker's token of choice `c`, went to the client: a completed stop string ends
  // the choice. With several choices so does `id` when it was the choice's first (a local
  // prefill's) and ends it; with one, the worker's finish follows on the stream anyway.
  void Sent(uint32_t c, bool first, int32_t id);

  // The prefill's first tokens that go to the client, in order: without choices its one token
  // (as a decode worker sends tokens); with choices, those of the choices not ended that have
  // nothing sent (a retry's prefill draws again what the client has), each once. INTERNAL for a
  // choice not asked for.
  absl::StatusOr<std::vector<v1::GeneratedToken>> FirstTokensToSend(
      const v1::PrefillResponse& prefill) const;

  // The first choice's end (the request's finish reason), `otherwise` while it goes on.
  v1::FinishReason FirstEnd(v1::FinishReason otherwise) const {
    return choices_[0].end.value_or(otherwise);
  }
  // The choices still going, with what was sent of each (AttemptRequest::choices).
  std::vector<ChoiceAsked> StillGoing() const;
  // Each choice's end (unspecified while going) and tokens, into `finish`.
  void AddFinishes(v1::Finish& finish) const;

 private:
  struct Choice {
    SentTokens sent;
    std::optional<v1::FinishReason> end;
  };
  std::vector<Choice> choices_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_CHOICE_SET_H_
