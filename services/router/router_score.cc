// RouterService's Score: a prompt's logprobs, computed by a prefill worker's full forward pass
// and spelled out here (each token's text and bytes), under the same checks, tenant limits and
// scheduling class as a Generate call.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/invalid_field.h"
#include "lib/rpc/request_id.h"
#include "lib/rpc/retry_after.h"
#include "lib/text/token_text_stream.h"
#include "services/router/request_checks.h"
#include "services/router/router_service.h"
#include "services/router/sent_tokens.h"

namespace yoco {
namespace {

grpc::Status Refuse(grpc::ServerContext& context, const absl::Status& status) {
  if (const std::string field = InvalidField(status); !field.empty()) {
    context.AddTrailingMetadata(kInvalidFieldMetadata, field);
  }
  return ToGrpcStatus(status);
}

}  // namespace

grpc::Status RouterService::Score(grpc::ServerContext* context, const v1::ScoreRequest* request,
                                  v1::ScoreResponse* response) {
  if (absl::Status id = CheckRequestId(request->request_id()); !id.ok()) {
    return Refuse(*context, id);
  }
  context->AddTrailingMetadata(
      kRequestIdMetadata, request->request_id().empty() ? NewRequestId() : request->request_id());
  absl::StatusOr<CallScope> scope = Scope(*context, false, "");
  if (!scope.ok()) return ToGrpcStatus(scope.status());
  absl::StatusOr<std::vector<int32_t>> tokens = CheckScoreRequest(*request, config_, *tokenizer_);
  if (!tokens.ok()) return Refuse(*context, tokens.status());
  // Scoring prefills the prompt: it counts against the tenant as a request and its prompt do.
  absl::StatusOr<std::unique_ptr<TenantUsage::Lease>> lease = AdmitTenant(*scope, tokens->size());
  if (!lease.ok()) {
    if (std::optional<absl::Duration> after = TenantUsage::RetryAfter(lease.status())) {
      context->AddTrailingMetadata(kRetryAfterMsMetadata,
                                   absl::StrCat(absl::ToInt64Milliseconds(*after)));
    }
    return ToGrpcStatus(lease.status());
  }
  v1::WorkerScoreRequest ask;
  ask.set_request_id(request->request_id());
  ask.mutable_tokens()->Add(tokens->begin(), tokens->end());
  ask.set_top_logprobs(request->top_logprobs());
  ask.mutable_scheduling()->set_tenant(scope->tenant);
  ask.mutable_scheduling()->set_priority(scope->scheduling.priority);
  ask.mutable_scheduling()->set_weight(scope->scheduling.weight);

  // A worker that goes away mid-call: the prompt is scored again on another one.
  grpc::Status st(grpc::StatusCode::UNAVAILABLE, "no healthy prefill worker");
  std::vector<size_t> tried;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const WorkerQuery query{.exclude = tried,
                            .prompt_tokens = static_cast<int64_t>(tokens->size()),
                            .load_penalty_tokens = options_.cache_load_penalty_tokens};
    std::optional<WorkerChoice> choice = prefill_workers_->Choose(query);
    if (!choice.has_value()) {  // a synchronous handler may wait on the probes: maybe just up
      prefill_workers_->ProbeAll();
      choice = prefill_workers_->Choose(query);
    }
    if (!choice.has_value()) break;
    WorkerRegistry::InFlight in_flight(*prefill_workers_, choice->index);
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    response->Clear();
    st = prefill_stubs_[choice->index]->Score(ctx.get(), ask, response);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE || context->IsCancelled()) break;
    prefill_workers_->Probe(choice->index);
    tried.push_back(choice->index);
  }
  if (!st.ok()) return st;
  if (response->tokens_size() != static_cast<int>(tokens->size())) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the prefill worker scored another prompt");
  }
  TokenTextStream text;
  for (v1::GeneratedToken& token : *response->mutable_tokens()) {
    const int32_t id = token.id();
    token.set_text(text.Add(tokenizer_->Decode({&id, 1})));
    if (!token.has_logprob()) continue;
    SpellOut(*tokenizer_, token.mutable_logprob());
    for (v1::TokenLogprob& top : *token.mutable_top_logprobs()) SpellOut(*tokenizer_, &top);
  }
  return grpc::Status::OK;
}

}  // namespace yoco
