// The tracing flags.
#include "lib/trace/trace_flags.h"

#include <cstdlib>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/trace/otlp_exporter.h"
#include "lib/trace/tracer.h"

ABSL_FLAG(std::string, otlp_endpoint, "",
          "send trace spans to this OTLP/HTTP endpoint, e.g. http://localhost:4318/v1/traces (an "
          "OpenTelemetry Collector); empty: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
          "$OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces, else no tracing");
ABSL_FLAG(double, trace_sample_ratio, 1.0,
          "the share of traces started here that are recorded, in [0, 1]; a request that comes "
          "with a W3C traceparent follows its caller's decision");

namespace yoco {
namespace {

std::shared_ptr<OtlpExporter>& Exporter() {
  static auto* exporter = new std::shared_ptr<OtlpExporter>();  // lives to the process's end
  return *exporter;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

absl::Status ConfigureTracingFromFlags(const std::string& program, const std::string& version) {
  const double ratio = absl::GetFlag(FLAGS_trace_sample_ratio);
  if (!(ratio >= 0.0 && ratio <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace-sample-ratio: ", ratio, " is not in [0, 1]"));
  }
  std::string endpoint = absl::GetFlag(FLAGS_otlp_endpoint);
  if (endpoint.empty()) endpoint = Env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (endpoint.empty() && !Env("OTEL_EXPORTER_OTLP_ENDPOINT").empty()) {
    endpoint =
        absl::StrCat(absl::StripSuffix(Env("OTEL_EXPORTER_OTLP_ENDPOINT"), "/"), "/v1/traces");
  }
  if (endpoint.empty()) {
    SetGlobalTracer(Tracer());
    return absl::OkStatus();
  }
  OtlpExporterOptions options;
  options.endpoint = endpoint;
  options.resource.service_name =
      Env("OTEL_SERVICE_NAME").empty() ? program : Env("OTEL_SERVICE_NAME");
  options.resource.service_version = version;
  absl::StatusOr<std::shared_ptr<OtlpExporter>> exporter = OtlpExporter::Create(options);
  if (!exporter.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp-endpoint: ", exporter.status().message()));
  }
  Exporter() = *exporter;
  SetGlobalTracer(Tracer(*exporter, ratio));
  return absl::OkStatus();
}

void FlushTraces() {
  if (Exporter() != nullptr) Exporter()->Flush();
}

}  // namespace yoco
