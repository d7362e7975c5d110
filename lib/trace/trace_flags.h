// --otlp-endpoint and --trace-sample-ratio, which every program that parses its flags with
// ParseServiceFlags takes (and OpenTelemetry's standard environment variables when the flag is
// not given: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME).
#ifndef YOCO_LIB_TRACE_TRACE_FLAGS_H_
#define YOCO_LIB_TRACE_TRACE_FLAGS_H_

#include <string>

#include "absl/status/status.h"

namespace yoco {

// Sets the global tracer from the flags for `program` (the spans' service.name unless
// OTEL_SERVICE_NAME says otherwise); INVALID_ARGUMENT naming a bad value. Tracing is off when no
// endpoint is given.
absl::Status ConfigureTracingFromFlags(const std::string& program, const std::string& version);

// Sends the spans still queued (a service's last step before it exits).
void FlushTraces();

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_TRACE_FLAGS_H_
