// Admission of a Generate call, in the order a refusal should be explained: a malformed request
// id first (nothing else can name the call in the logs), then who the caller is, then what it
// asks, then whether its tenant has room for it.
#include "services/router/generate_admission.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/rpc/request_id.h"
#include "lib/rpc/retry_after.h"

namespace yoco {

absl::Status AdmitGenerate(WorkerPool& pool, grpc::CallbackServerContext& context,
                           const v1::GenerateRequest& request, RequestTrace& trace,
                           AdmittedGenerate& admitted) {
  if (absl::Status id = CheckRequestId(request.request_id()); !id.ok()) {
    context.AddTrailingMetadata(kInvalidFieldMetadata, InvalidField(id));
    return id;
  }
  admitted.request_id = request.request_id().empty() ? NewRequestId() : request.request_id();
  context.AddTrailingMetadata(kRequestIdMetadata, admitted.request_id);
  absl::StatusOr<CallScope> scope =
      pool.Scope(context, !request.cache_salt().empty(), request.cache_salt());
  if (!scope.ok()) return scope.status();
  admitted.scope = *std::move(scope);
  const CallScope& caller = admitted.scope;
  if (!caller.tenant.empty()) {
    pool.metrics().tenant_requests.Add({{"tenant", caller.tenant}}).Increment();
  }
  absl::StatusOr<CheckedGenerateRequest> call = CheckGenerateRequest(
      request, pool.config(), pool.tokenizer(), pool.options().default_max_new_tokens);
  if (!call.ok()) {
    if (const std::string field = InvalidField(call.status()); !field.empty()) {
      context.AddTrailingMetadata(kInvalidFieldMetadata, field);
    }
    return call.status();
  }
  admitted.call = *std::move(call);
  trace.Describe(admitted.call, admitted.request_id, caller.tenant);
  absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> lease =
      pool.AdmitTenant(caller, admitted.call.prompt.size());
  if (!lease.ok()) {
    if (std::optional<absl::Duration> after = TenantUsage::RetryAfter(lease.status())) {
      context.AddTrailingMetadata(kRetryAfterMsMetadata,
                                  absl::StrCat(absl::ToInt64Milliseconds(*after)));
    }
    return lease.status();
  }
  admitted.tenant_lease = *std::move(lease);
  admitted.scheduling.set_tenant(caller.tenant);
  admitted.scheduling.set_priority(admitted.call.priority.value_or(caller.scheduling.priority));
  admitted.scheduling.set_weight(caller.scheduling.weight);
  return absl::OkStatus();
}

}  // namespace yoco
