// The access log line; fields a request did not have (tenant, trace, workers) are left out rather
// than written empty, so a line says only what happened.
#include "services/router/access_log.h"

#include "absl/strings/str_format.h"
#include "lib/log/log.h"
#include "services/router/router_metrics.h"

namespace yoco {

void LogRequestFinished(const AccessLogEntry& entry) {
  LogLine line(LogLevel::kInfo, "request finished");
  line.With("request_id", entry.request_id);
  if (!entry.trace_id.empty()) line.With("trace_id", entry.trace_id);
  line.With("outcome", OutcomeName(entry.status.error_code()))
      .With("finish_reason", v1::FinishReason_Name(entry.finish.reason()));
  if (!entry.tenant.empty()) line.With("tenant", entry.tenant);
  const v1::Usage& usage = entry.finish.usage();
  line.With("prompt_tokens", usage.prompt_tokens())
      .With("cached_tokens", usage.cached_prompt_tokens())
      .With("generated_tokens", usage.generated_tokens())
      .With("ttft_ms", entry.finish.timings().ttft_ms())
      .With("duration_ms", entry.duration_ms)
      .With("retries", entry.retries);
  if (!entry.prefill.empty()) line.With("prefill", entry.prefill);
  if (!entry.decode.empty()) line.With("decode", entry.decode);
  if (entry.model_version != 0) {
    line.With("model_version", absl::StrFormat("%016x", entry.model_version));
  }
  if (entry.priority != 0) line.With("priority", entry.priority);
  if (!entry.status.ok()) line.With("error", entry.status.error_message());
}

}  // namespace yoco
