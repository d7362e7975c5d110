// Tracer: parent-based sampling with a trace-id ratio for new traces, as OpenTelemetry's
// ParentBased(TraceIdRatioBased) sampler does.
#include "lib/trace/tracer.h"

#include <cmath>

#include "absl/synchronization/mutex.h"

namespace yoco {

bool Tracer::Samples(const TraceId& id) const {
  if (sample_ratio_ >= 1.0) return true;
  if (sample_ratio_ <= 0.0) return false;
  // The id's last 8 bytes as a number below 2^64, against ratio * 2^64 (W3C's random bits).
  uint64_t low = 0;
  for (int i = 8; i < 16; ++i) low = (low << 8) | id[i];
  return static_cast<double>(low) < std::ldexp(sample_ratio_, 64);
}

Span Tracer::StartSpan(std::string name, SpanKind kind, const TraceContext* parent,
                       absl::Time start) const {
  const bool has_parent = parent != nullptr && parent->valid();
  TraceContext context;
  if (has_parent) {
    context = *parent;
  } else {
    context.trace_id = NewTraceId();
    context.sampled = enabled() && Samples(context.trace_id);
  }
  if (!enabled()) {
    // Passes the caller's trace on unchanged; a trace started here is not recorded anywhere.
    return has_parent ? Span(context) : Span();
  }
  const SpanId parent_span = has_parent ? parent->span_id : SpanId{};
  context.span_id = NewSpanId();
  if (!context.sampled) return Span(context);
  return Span(sink_, std::move(context), parent_span, std::move(name), kind, start);
}

namespace {

struct GlobalTracerSlot {
  absl::Mutex mu;
  std::shared_ptr<const Tracer> tracer ABSL_GUARDED_BY(mu) = std::make_shared<Tracer>();
};

GlobalTracerSlot& Slot() {
  static GlobalTracerSlot* slot = new GlobalTracerSlot;  // never destroyed: used at exit
  return *slot;
}

}  // namespace

std::shared_ptr<const Tracer> GlobalTracer() {
  GlobalTracerSlot& slot = Slot();
  absl::MutexLock lock(&slot.mu);
  return slot.tracer;
}

void SetGlobalTracer(Tracer tracer) {
  GlobalTracerSlot& slot = Slot();
  absl::MutexLock lock(&slot.mu);
  slot.tracer = std::make_shared<const Tracer>(std::move(tracer));
}

}  // namespace yoco
