// Trace context to and from gRPC metadata.
#include "lib/rpc/trace_metadata.h"

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
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (!status.ok()) {
    const int code = static_cast<int>(status.error_code());
    span.SetAttribute("error.type", code >= 0 && code < 17 ? kNames[code] : "UNKNOWN");
    span.SetError(status.error_message());
  }
  span.End();
}

}  // namespace yoco
