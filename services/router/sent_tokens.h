// SentTokens: what a Generate stream has sent its client, which every retry continues from — the
// token ids, their text (UTF-8 assembled across tokens, a stop string noted), when each went —
// and the token at which the stream ends.
#ifndef YOCO_SERVICES_ROUTER_SENT_TOKENS_H_
#define YOCO_SERVICES_ROUTER_SENT_TOKENS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "lib/text/token_text_stream.h"
#include "lib/text/tokenizer.h"
#include "services/router/request_checks.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

// Fills a token's bytes (empty for a special id or one the tokenizer cannot spell).
void SpellOut(const Tokenizer& tokenizer, v1::TokenLogprob* token);

class SentTokens {
 public:
  using Clock = std::chrono::steady_clock;

  SentTokens() = default;
  // `call` and `tokenizer` outlive this object; `start` is when the request came.
  SentTokens(const CheckedGenerateRequest& call, const Tokenizer& tokenizer,
             Clock::time_point start);

  struct Sent {
    v1::GeneratedToken message;
    bool first = false;
    double seconds = 0;  // since the previous token, or for the first since the request came
  };
  // Records the token a worker produced (its id, and its log-probabilities when the request
  // asked for them) as sent at `now`.
  Sent Add(const v1::GeneratedToken& produced, Clock::time_point now);

  // Why the stream ends at `id`, the token just added, if it does: a stop token, EOS (when
  // asked), a stop string, the length.
  std::optional<v1::FinishReason> EndsAt(int32_t id) const;
  // A stop string was completed: nothing more goes to the client.
  bool stopped() const { return text_.stopped(); }

  const std::vector<int32_t>& ids() const { return ids_; }
  uint32_t still_to_come() const;

 private:
  const CheckedGenerateRequest* call_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  std::vector<int32_t> ids_;
  TokenTextStream text_;
  Clock::time_point last_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_SENT_TOKENS_H_
