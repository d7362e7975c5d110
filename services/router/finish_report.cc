// The Finish message's bookkeeping across attempts.
#include "services/router/finish_report.h"

#include <algorithm>
#include <cstdint>

namespace yoco {

void FinishReport::NoteLocalPrefill() {
  finish_.set_local_prefill(true);
  if (cache_reported_) return;
  cache_reported_ = true;
  finish_.set_cache_tier("none");
  finish_.set_cache_miss_reason("none");
}

bool FinishReport::NotePrefill(const v1::PrefillResponse& prefill, size_t prompt_tokens,
                               absl::FunctionRef<std::optional<ForgottenReason>()> why_forgotten) {
  v1::Timings& timings = *finish_.mutable_timings();
  timings.set_prefill_ms(timings.prefill_ms() + prefill.prefill_ms());
  timings.set_transfer_ms(timings.transfer_ms() + prefill.transfer_ms());
  finish_.set_transfer_bytes(finish_.transfer_bytes() + prefill.bundle_bytes());
  if (cache_reported_) return false;
  cache_reported_ = true;
  finish_.mutable_usage()->set_cached_prompt_tokens(
      std::min<uint32_t>(prefill.cached_tokens(), static_cast<uint32_t>(prompt_tokens)));
  finish_.set_cache_tier(prefill.cache_tier());
  finish_.set_cache_miss_reason(prefill.cache_miss_reason());
  // A worker that never held the prompt's snapshot says "none"; the index may know better.
  if (prefill.cache_miss_reason() == "none") {
    if (std::optional<ForgottenReason> why = why_forgotten()) {
      finish_.set_cache_miss_reason(*why == ForgottenReason::kExpired ? "expired" : "evicted");
    }
  }
  return true;
}

void FinishReport::AddPrefillMs(double ms) {
  finish_.mutable_timings()->set_prefill_ms(finish_.timings().prefill_ms() + ms);
}

void FinishReport::AddDecodeMs(double ms) {
  finish_.mutable_timings()->set_decode_ms(finish_.timings().decode_ms() + ms);
}

void FinishReport::SetTtftMs(double ms) { finish_.mutable_timings()->set_ttft_ms(ms); }

v1::Finish FinishReport::Finished(v1::FinishReason reason, size_t prompt_tokens,
                                  size_t generated_tokens) const {
  v1::Finish finish = finish_;
  finish.set_reason(reason);
  finish.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens));
  finish.mutable_usage()->set_generated_tokens(static_cast<uint32_t>(generated_tokens));
  return finish;
}

}  // namespace yoco
