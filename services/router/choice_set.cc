// The choices' ends, as the worker and the text decide them.
#include "services/router/choice_set.h"

#include <algorithm>

namespace yoco {

ChoiceSet::ChoiceSet(const CheckedGenerateRequest& call, const Tokenizer& tokenizer,
                     SentTokens::Clock::time_point start) {
  for (uint32_t c = 0; c < call.choices; ++c) {
    choices_.push_back({SentTokens(call, tokenizer, start), std::nullopt});
  }
}

bool ChoiceSet::AllEnded() const {
  return std::all_of(choices_.begin(), choices_.end(),
                     [](const Choice& c) { return c.end.has_value(); });
}

void ChoiceSet::WorkerFinished(uint32_t c, v1::FinishReason reason) {
  Choice& choice = choices_[c];
  if (!choice.end.has_value() && reason != v1::FINISH_REASON_UNSPECIFIED &&
      reason != v1::FINISH_REASON_CANCELLED) {
    choice.end = reason;
  }
}

void ChoiceSet::EndIfItEndsAt(uint32_t c, int32_t id) {
  Choice& choice = choices_[c];
  if (!choice.end.has_value()) choice.end = choice.sent.EndsAt(id);
}

absl::StatusOr<std::vector<v1::GeneratedToken>> ChoiceSet::FirstTokensToSend(
    const v1::PrefillResponse& prefill) const {
  std::vector<v1::GeneratedToken> tokens;
  if (!multi()) {
    v1::GeneratedToken& token = tokens.emplace_back();
    token.set_id(prefill.first_token());
    if (prefill.has_first_token_logprob()) {
      *token.mutable_logprob() = prefill.first_token_logprob();
      *token.mutable_top_logprobs() = prefill.first_token_top_logprobs();
    }
    return tokens;
  }
  std::vector<bool> taken(size());  // a choice answered twice goes once
  for (const v1::GeneratedToken& token : prefill.choice_first_tokens()) {
    const uint32_t c = token.choice();
    if (c >= size()) {
      return absl::InternalError("the prefill worker answered for a choice not asked for");
    }
    if (!ended(c) && sent(c).ids().empty() && !taken[c]) tokens.push_back(token);
    taken[c] = true;
  }
  return tokens;
}

void ChoiceSet::Sent(uint32_t c, bool first, int32_t id) {
  if (choices_[c].sent.stopped()) choices_[c].end = v1::FINISH_REASON_STOP;
  if (first && multi()) EndIfItEndsAt(c, id);
}

std::vector<ChoiceAsked> ChoiceSet::StillGoing() const {
  std::vector<ChoiceAsked> going;
  for (uint32_t c = 0; c < choices_.size(); ++c) {
    const SentTokens& sent = choices_[c].sent;
    if (!choices_[c].end.has_value()) going.push_back({c, sent.ids(), sent.still_to_come()});
  }
  return going;
}

void ChoiceSet::AddFinishes(v1::Finish& finish) const {
  for (const Choice& c : choices_) {
    v1::ChoiceFinish* end = finish.add_choices();
    end->set_reason(c.end.value_or(v1::FINISH_REASON_UNSPECIFIED));
    end->set_generated_tokens(static_cast<uint32_t>(c.sent.ids().size()));
  }
}

}  // namespace yoco
