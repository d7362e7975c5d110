// FinishReport: the Finish message that ends a Generate stream, gathered across its attempts.
// The prompt's cache outcome is the first prefill's (a retry prefills the prompt plus tokens the
// router itself sent, which says nothing about the client's cache); phase times and bytes
// shipped are every attempt's, summed.
#ifndef YOCO_SERVICES_ROUTER_FINISH_REPORT_H_
#define YOCO_SERVICES_ROUTER_FINISH_REPORT_H_

#include <cstddef>
#include <optional>

#include "absl/functional/function_ref.h"
#include "lib/routing/worker_registry.h"
#include "yoco/v1/worker.pb.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

class FinishReport {
 public:
  // The decode worker prefilled this attempt itself: no cache was looked at.
  void NoteLocalPrefill();
  // A prefill worker answered. `prompt_tokens`: the client's prompt (a retry's cached tokens
  // may cover generated ones too). `why_forgotten` is asked only when the first prefill's worker
  // never held the prompt's snapshot. Returns whether this prefill was the first.
  bool NotePrefill(const v1::PrefillResponse& prefill, size_t prompt_tokens,
                   absl::FunctionRef<std::optional<ForgottenReason>()> why_forgotten);
  void AddPrefillMs(double ms);
  void AddDecodeMs(double ms);
  void SetTtftMs(double ms);

  // The message of a request that ended with `reason`.
  v1::Finish Finished(v1::FinishReason reason, size_t prompt_tokens, size_t generated_tokens) const;

 private:
  v1::Finish finish_;
  bool cache_reported_ = false;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_FINISH_REPORT_H_
