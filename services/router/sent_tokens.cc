// The tokens sent to a client and where its stream ends.
#include "services/router/sent_tokens.h"

namespace yoco {

SentTokens::SentTokens(const CheckedGenerateRequest& call, const Tokenizer& tokenizer,
                       Clock::time_point start)
    : call_(&call), tokenizer_(&tokenizer), text_(call.stop_strings), last_(start) {}

SentTokens::Sent SentTokens::Add(const v1::GeneratedToken& produced, Clock::time_point now) {
  const int32_t id = produced.id();
  ids_.push_back(id);
  Sent sent;
  sent.message.set_id(id);
  if (produced.has_logprob()) {
    *sent.message.mutable_logprob() = produced.logprob();
    *sent.message.mutable_top_logprobs() = produced.top_logprobs();
    SpellOut(*tokenizer_, sent.message.mutable_logprob());
    for (v1::TokenLogprob& top : *sent.message.mutable_top_logprobs()) SpellOut(*tokenizer_, &top);
  }
  sent.message.set_index(static_cast<uint32_t>(ids_.size() - 1));
  sent.message.set_text(text_.Add(tokenizer_->Decode({&id, 1})));
  sent.first = ids_.size() == 1;
  sent.seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  return sent;
}

void SpellOut(const Tokenizer& tokenizer, v1::TokenLogprob* token) {
  const int32_t id = token->id();
  absl::StatusOr<std::string> bytes = tokenizer.Decode({&id, 1});
  token->set_token(bytes.ok() ? *std::move(bytes) : std::string());
}

std::optional<v1::FinishReason> SentTokens::EndsAt(int32_t id) const {
  switch (StopAfter(call_->sampling, call_->stop_at_eos, id)) {
    case TokenStop::kStopToken:
      return v1::FINISH_REASON_STOP;
    case TokenStop::kEos:
      return v1::FINISH_REASON_EOS;
    case TokenStop::kNone:
      break;
  }
  if (text_.stopped()) return v1::FINISH_REASON_STOP;
  if (ids_.size() >= call_->max_new_tokens) return v1::FINISH_REASON_LENGTH;
  return std::nullopt;
}

uint32_t SentTokens::still_to_come() const {
  return call_->max_new_tokens - static_cast<uint32_t>(ids_.size());
}

}  // namespace yoco
