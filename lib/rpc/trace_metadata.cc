// Trace context to and from gRPC metadata.
#include "lib/rpc/trace_metadata.h"

#include "absl/status/status.h"

namespace yoco {

std::optional<TraceContext> TraceFromMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  const auto parent = metadata.find(kTraceparentHeader);
  if (parent == metadata.end()) return std::nullopt;
  std::optional<TraceContext> trace =
      ParseTraceparent(absl::string_view(parent->second.data(), parent->second.size()));
  if (!trace.has_value()) return std::nullopt;
  if (const auto state = metadata.find(kTracestateHeader); state != metadata.end()) {
    trace->tracestate =
        CheckedTracestate(absl::string_view(state->second.data(), state->second.size()));
  }
  return trace;
}

void InjectTrace(const TraceContext& trace, grpc::ClientContext* call) {
  if (!trace.valid()) return;
  call->AddMetadata(kTraceparentHeader, trace.Traceparent());
  if (!trace.tracestate.empty()) call->AddMetadata(kTracestateHeader, trace.tracestate);
}

void EndSpan(Span& span, const grpc::Status& status) {
  // gRPC's and absl's codes are the same numbers.
  span.SetStatus(
      absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()));
  span.End();
}

}  // namespace yoco
