// RequestLedger: what one Generate request counts and reports about itself. As tokens go out:
// the router's token metrics, the tenant's counters and token charge, the first token's mark in
// the trace; across attempts: the Finish message's figures (FinishReport) and the workers called;
// at the end: the outcome metric, the trace's end and the access log line.
#ifndef YOCO_SERVICES_ROUTER_REQUEST_LEDGER_H_
#define YOCO_SERVICES_ROUTER_REQUEST_LEDGER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"
#include "services/router/finish_report.h"
#include "services/router/generate_admission.h"
#include "services/router/request_trace.h"
#include "services/router/worker_pool.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

class RequestLedger {
 public:
  // `admitted` is filled later (admission runs after construction) and read from then on.
  RequestLedger(WorkerPool& pool, RequestTrace& trace, const AdmittedGenerate& admitted,
                std::chrono::steady_clock::time_point start)
      : pool_(pool), trace_(trace), admitted_(admitted), start_(start) {}

  FinishReport& report() { return report_; }

  // The decode worker prefills this attempt itself.
  void LocalPrefill();
  // A prefill worker answered: the Finish message's cache figures and the router's cache hits
  // come from the first (`why_forgotten`: FinishReport::NotePrefill's).
  void PrefillAnswered(const v1::PrefillResponse& prefill,
                       absl::FunctionRef<std::optional<ForgottenReason>()> why_forgotten);

  // For the access log: the last prefill worker and decode worker called.
  void PrefillCalled(size_t index) { prefill_ = index; }
  void DecodeCalled(size_t index) { decode_ = index; }

  // A token went to the client `seconds` after the one before (the first: after the request
  // arrived).
  void TokenSent(double seconds);
  size_t tokens_sent() const { return tokens_sent_; }

  // The Finish message of a request that ended with `reason` (UNSPECIFIED for a failure).
  v1::Finish Finished(v1::FinishReason reason) const;
  // The request ended with `status` and `finish` after `retries` retries, on workers of
  // `model_version` (0: none chosen).
  void Ended(const grpc::Status& status, const v1::Finish& finish, int retries,
             uint64_t model_version);

 private:
  WorkerPool& pool_;
  RequestTrace& trace_;
  const AdmittedGenerate& admitted_;
  const std::chrono::steady_clock::time_point start_;
  FinishReport report_;
  size_t tokens_sent_ = 0;  // of all choices
  std::optional<size_t> prefill_, decode_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_REQUEST_LEDGER_H_
