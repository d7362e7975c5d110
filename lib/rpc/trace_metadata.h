// A request's trace context in gRPC metadata: `traceparent` and `tracestate`, as W3C Trace
// Context names them for HTTP (gRPC metadata keys are HTTP/2 headers), so OpenTelemetry's gRPC
// instrumentation in a client interoperates.
#ifndef YOCO_LIB_RPC_TRACE_METADATA_H_
#define YOCO_LIB_RPC_TRACE_METADATA_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <optional>

#include "lib/trace/span.h"
#include "lib/trace/trace_context.h"

namespace yoco {

// What a caller sent; nullopt when nothing or a malformed traceparent (a new trace then).
std::optional<TraceContext> TraceFromMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata);

// Adds `trace` to a call's metadata; nothing when it is invalid.
void InjectTrace(const TraceContext& trace, grpc::ClientContext* call);

// Ends `span` with the call's `status`: a failure sets error.type (the gRPC code's name) and the
// span's error status with the message.
void EndSpan(Span& span, const grpc::Status& status);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_TRACE_METADATA_H_
