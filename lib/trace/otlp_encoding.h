// The OTLP/HTTP request body for finished spans: an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1) in protobuf's binary encoding, written by hand — no
// OpenTelemetry C++ library is packaged for Debian 12, and the few messages a trace needs are
// short. Tests decode it with the official definitions (the npm package of OpenTelemetry JS).
#ifndef YOCO_LIB_TRACE_OTLP_ENCODING_H_
#define YOCO_LIB_TRACE_OTLP_ENCODING_H_

#include <string>

#include "absl/types/span.h"
#include "lib/trace/span.h"

namespace yoco {

// Who sent the spans: the resource's `service.name` (and `service.version`).
struct TraceResource {
  std::string service_name;
  std::string service_version;
};

std::string EncodeOtlpTraces(const TraceResource& resource, absl::Span<const SpanData> spans);

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_OTLP_ENCODING_H_
