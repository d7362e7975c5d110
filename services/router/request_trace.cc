// Attribute names: gen_ai.* where OpenTelemetry's generative-AI semantic conventions have one
// (operation, request parameters, usage), server.address for the worker called, error.type for
// a failure's gRPC code, and yoco.* for what is this system's own (cache, transfer, retries).
#include "services/router/request_trace.h"

#include "absl/strings/str_cat.h"
#include "lib/rpc/trace_metadata.h"

namespace yoco {
RequestTrace::RequestTrace(const grpc::CallbackServerContext& context, const std::string& model)
    : tracer_(GlobalTracer()) {
  const std::optional<TraceContext> parent = TraceFromMetadata(context.client_metadata());
  request_ = tracer_->StartSpan(absl::StrCat("text_completion ", model), SpanKind::kServer,
                                parent.has_value() ? &*parent : nullptr);
  request_.SetAttribute("gen_ai.operation.name", "text_completion")
      .SetAttribute("gen_ai.request.model", model);
}

std::string RequestTrace::trace_id() const {
  return request_.context().valid() ? request_.context().TraceIdHex() : "";
}

void RequestTrace::Describe(const CheckedGenerateRequest& call, const std::string& request_id,
                            const std::string& tenant) {
  if (!request_.recording()) return;
  request_.SetAttribute("gen_ai.request.max_tokens", call.max_new_tokens)
      .SetAttribute("gen_ai.request.temperature", static_cast<double>(call.sampling.temperature))
      .SetAttribute("gen_ai.request.top_p", static_cast<double>(call.sampling.top_p))
      .SetAttribute("gen_ai.request.top_k", call.sampling.top_k)
      .SetAttribute("gen_ai.request.seed", call.sampling.seed)
      .SetAttribute("gen_ai.usage.input_tokens", static_cast<int64_t>(call.prompt.size()))
      .SetAttribute("yoco.request_id", request_id);
  if (!tenant.empty()) request_.SetAttribute("yoco.tenant", tenant);
}

void RequestTrace::StartChoosing(int attempt) {
  choosing_ = tracer_->StartSpan("yoco.router.choose", SpanKind::kInternal, &request_.context());
  choosing_.SetAttribute("yoco.attempt", attempt);
  waiting_for_.clear();
}

void RequestTrace::NoteWait(absl::string_view what) {
  if (what == waiting_for_) return;  // a wait for workers looks again every 100 ms
  waiting_for_ = std::string(what);
  choosing_.AddEvent(absl::StrCat("wait for ", what));
}

void RequestTrace::Chosen(const std::string& prefill, const std::string& decode) {
  choosing_.SetAttribute("yoco.prefill.worker", prefill)
      .SetAttribute("yoco.decode.worker", decode)
      .SetAttribute("yoco.local_prefill", prefill == "local");
  choosing_.End();
}

void RequestTrace::StartPrefill(const std::string& worker, grpc::ClientContext* call) {
  prefill_ = tracer_->StartSpan("yoco.prefill", SpanKind::kClient, &request_.context());
  prefill_.SetAttribute("server.address", worker);
  InjectTrace(prefill_.context(), call);
}

void RequestTrace::PrefillDone(const grpc::Status& status, const v1::PrefillResponse& response) {
  if (status.ok()) {
    prefill_.SetAttribute("yoco.cached_tokens", response.cached_tokens())
        .SetAttribute("yoco.cache.tier", response.cache_tier())
        .SetAttribute("yoco.bundle.bytes", response.bundle_bytes())
        .SetAttribute("yoco.prefill_ms", response.prefill_ms())
        .SetAttribute("yoco.transfer_ms", response.transfer_ms());
    if (!response.cache_miss_reason().empty()) {
      prefill_.SetAttribute("yoco.cache.miss_reason", response.cache_miss_reason());
    }
  }
  EndSpan(prefill_, status);
}

const TraceContext& RequestTrace::StartDecode(const std::string& worker) {
  decode_ = tracer_->StartSpan("yoco.decode", SpanKind::kClient, &request_.context());
  decode_.SetAttribute("server.address", worker);
  return decode_.context();
}

void RequestTrace::DecodeDone(const grpc::Status& status, v1::FinishReason reason) {
  if (reason != v1::FINISH_REASON_UNSPECIFIED) {
    decode_.SetAttribute("yoco.finish_reason", v1::FinishReason_Name(reason));
  }
  EndSpan(decode_, status);
}

void RequestTrace::FirstToken() { request_.AddEvent("first_token"); }

void RequestTrace::End(const grpc::Status& status, const v1::Finish& finish, int retries) {
  choosing_.End();
  prefill_.End();
  decode_.End();
  if (request_.recording()) {
    request_.SetAttribute("gen_ai.usage.output_tokens", finish.usage().generated_tokens())
        .SetAttribute("yoco.cached_tokens", finish.usage().cached_prompt_tokens())
        .SetAttribute("yoco.retries", retries);
    if (finish.reason() != v1::FINISH_REASON_UNSPECIFIED) {
      request_.SetAttribute("yoco.finish_reason", v1::FinishReason_Name(finish.reason()));
    }
  }
  EndSpan(request_, status);
}

}  // namespace yoco
