// Span: one timed phase of a request in a trace (the router's pair choice, a prefill, a decode
// stream...), with attributes, events and a status, as OpenTelemetry models it. A Span is a
// handle: it records only when its trace is sampled and tracing is on; otherwise every call is a
// no-op, and context() still passes the caller's trace on. End() (or the destructor) hands the
// finished span to the Tracer's exporter.
//
//   Span prefill = tracer.StartSpan("yoco.prefill", SpanKind::kClient, &request_span.context());
//   prefill.SetAttribute("yoco.cached_tokens", int64_t{cached});
//   InjectTrace(prefill.context(), &client_context);
#ifndef YOCO_LIB_TRACE_SPAN_H_
#define YOCO_LIB_TRACE_SPAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/trace/trace_context.h"

namespace yoco {

// OTLP's Span.SpanKind values.
enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3, kConsumer = 5 };

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct SpanAttribute {
  std::string key;
  AttributeValue value;
};

struct SpanEvent {
  std::string name;
  absl::Time time;
  std::vector<SpanAttribute> attributes;
};

// A finished span, as the exporter sends it.
struct SpanData {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zeros for a root span
  std::string tracestate;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  absl::Time start;
  absl::Time end;
  std::vector<SpanAttribute> attributes;
  std::vector<SpanEvent> events;
  bool error = false;  // OTLP status ERROR with `error_message`; otherwise UNSET
  std::string error_message;
};

class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void Export(SpanData span) = 0;  // must not block
};

class Span {
 public:
  Span() = default;  // records nothing, passes no trace on
  // Passes `context` on without recording (tracing off or not sampled).
  explicit Span(TraceContext context) : context_(std::move(context)) {}
  // Records into `sink` (kept alive by the span) from now on.
  Span(std::shared_ptr<SpanSink> sink, TraceContext context, const SpanId& parent, std::string name,
       SpanKind kind, absl::Time start = absl::Now());
  Span(Span&&) = default;
  Span& operator=(Span&& other);
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() { End(); }

  bool recording() const { return data_ != nullptr; }
  // This span's place in the trace: what a call made within it carries (its span id is the
  // parent of the callee's spans). Invalid when there is no trace.
  const TraceContext& context() const { return context_; }

  Span& SetAttribute(absl::string_view key, absl::string_view value);
  Span& SetAttribute(absl::string_view key, const char* value) {
    return SetAttribute(key, absl::string_view(value));
  }
  Span& SetAttribute(absl::string_view key, const std::string& value) {
    return SetAttribute(key, absl::string_view(value));
  }
  Span& SetAttribute(absl::string_view key, int64_t value);
  Span& SetAttribute(absl::string_view key, int value) { return SetAttribute(key, int64_t{value}); }
  Span& SetAttribute(absl::string_view key, uint32_t value) {
    return SetAttribute(key, int64_t{value});
  }
  Span& SetAttribute(absl::string_view key, uint64_t value) {
    return SetAttribute(key, static_cast<int64_t>(value));
  }
  Span& SetAttribute(absl::string_view key, double value);
  Span& SetAttribute(absl::string_view key, bool value);
  Span& AddEvent(absl::string_view name, absl::Time time = absl::Now());
  Span& SetError(absl::string_view message);
  // A failed `status` marks the span an error with its message and sets error.type to the
  // code's name (OpenTelemetry's attribute; absl names codes as gRPC does); OK sets nothing.
  Span& SetStatus(const absl::Status& status);

  // Ends the span at `end` and exports it; later calls do nothing.
  void End(absl::Time end = absl::Now());

 private:
  Span& Set(absl::string_view key, AttributeValue value);

  TraceContext context_;
  std::shared_ptr<SpanSink> sink_;
  std::unique_ptr<SpanData> data_;
};

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_SPAN_H_
