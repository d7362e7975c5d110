// The ledger's entries: metrics and counters as they happen, the trace's end and the access log
// line once.
#include "services/router/request_ledger.h"

#include <string>

#include "services/router/access_log.h"

namespace yoco {

void RequestLedger::LocalPrefill() {
  report_.NoteLocalPrefill();
  pool_.metrics().local_prefills.Increment();
}

void RequestLedger::PrefillAnswered(
    const v1::PrefillResponse& prefill,
    absl::FunctionRef<std::optional<ForgottenReason>()> why_forgotten) {
  const bool first = report_.NotePrefill(prefill, admitted_.call.prompt.size(), why_forgotten);
  if (first && prefill.cached_tokens() > 0) {
    pool_.metrics().cache_hits.Increment();
    pool_.metrics().cached_prompt_tokens.Increment(prefill.cached_tokens());
  }
}

void RequestLedger::TokenSent(double seconds) {
  RouterMetrics& metrics = pool_.metrics();
  if (++tokens_sent_ == 1) {
    trace_.FirstToken();
    report_.SetTtftMs(seconds * 1000);
    metrics.time_to_first_token.Observe(seconds);
  } else {
    metrics.inter_token.Observe(seconds);
  }
  metrics.generated_tokens.Increment();
  if (admitted_.scope.generated_tokens != nullptr) admitted_.scope.generated_tokens->Increment();
  if (admitted_.tenant_lease != nullptr) admitted_.tenant_lease->ChargeGenerated(1);
}

v1::Finish RequestLedger::Finished(v1::FinishReason reason) const {
  return report_.Finished(reason, admitted_.call.prompt.size(), tokens_sent_);
}

void RequestLedger::Ended(const grpc::Status& status, const v1::Finish& finish, int retries,
                          uint64_t model_version) {
  pool_.metrics().Outcome(status.error_code()).Increment();
  if (status.ok() && admitted_.scope.prompt_tokens != nullptr) {
    admitted_.scope.prompt_tokens->Increment(admitted_.call.prompt.size());
  }
  trace_.End(status, finish, retries);
  if (!pool_.options().access_log) return;
  std::string prefill;
  if (finish.local_prefill()) {
    prefill = "local";
  } else if (prefill_.has_value()) {
    prefill = pool_.WorkerAddress(WorkerRole::kPrefill, *prefill_);
  }
  LogRequestFinished(
      {.request_id = admitted_.request_id,
       .trace_id = trace_.trace_id(),
       .tenant = admitted_.scope.tenant,
       .status = status,
       .finish = finish,
       .duration_ms =
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
               .count(),
       .retries = retries,
       .prefill = prefill,
       .decode =
           decode_.has_value() ? pool_.WorkerAddress(WorkerRole::kDecode, *decode_) : std::string(),
       .model_version = model_version,
       .priority = admitted_.scheduling.priority()});
}

}  // namespace yoco
