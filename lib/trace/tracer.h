// Tracer: starts spans for one service and decides which traces are recorded. A span whose
// caller sent a trace context follows the caller's sampling decision (so a trace is whole or
// absent); a trace started here is sampled with the configured ratio, decided from its trace id
// so every service that starts from the same id would decide alike. Without a sink (tracing
// off) spans record nothing but still pass the caller's trace on.
//
// One process-wide tracer is configured at start-up from --otlp-endpoint and
// --trace-sample-ratio (trace_flags.h); the services take it with GlobalTracer() when a request
// starts.
#ifndef YOCO_LIB_TRACE_TRACER_H_
#define YOCO_LIB_TRACE_TRACER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/trace/span.h"
#include "lib/trace/trace_context.h"

namespace yoco {

class Tracer {
 public:
  Tracer() = default;  // off: records nothing
  // Records sampled spans into `sink`; `sample_ratio` in [0, 1] for traces started here.
  Tracer(std::shared_ptr<SpanSink> sink, double sample_ratio)
      : sink_(std::move(sink)), sample_ratio_(sample_ratio) {}

  bool enabled() const { return sink_ != nullptr; }

  // A span under `parent` (a caller's context or a span's), or the root of a new trace when
  // `parent` is null or invalid.
  Span StartSpan(std::string name, SpanKind kind, const TraceContext* parent,
                 absl::Time start = absl::Now()) const;

  // Whether a trace started here with `id` is sampled.
  bool Samples(const TraceId& id) const;

 private:
  std::shared_ptr<SpanSink> sink_;
  double sample_ratio_ = 1.0;
};

// The process's tracer (off until configured).
std::shared_ptr<const Tracer> GlobalTracer();
void SetGlobalTracer(Tracer tracer);

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_TRACER_H_
