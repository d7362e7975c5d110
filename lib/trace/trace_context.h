// TraceContext: where a request is in a distributed trace — its trace id, the span that is its
// caller, whether the trace is sampled, and the vendors' tracestate — as W3C Trace Context
// (https://www.w3.org/TR/trace-context/) carries it in the `traceparent` and `tracestate` headers
// (gRPC metadata keys of the same names). The router accepts them from a client (or starts a
// trace) and passes them on to the workers, so one request is one trace across the services.
#ifndef YOCO_LIB_TRACE_TRACE_CONTEXT_H_
#define YOCO_LIB_TRACE_TRACE_CONTEXT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace yoco {

inline constexpr char kTraceparentHeader[] = "traceparent";
inline constexpr char kTracestateHeader[] = "tracestate";

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};  // the caller's span: the parent of the spans made from this context
  bool sampled = false;
  std::string tracestate;  // passed on unchanged (only the length is checked)

  bool valid() const;  // neither id all zeros
  std::string TraceIdHex() const;
  std::string SpanIdHex() const;
  // "00-<trace id>-<span id>-<flags>".
  std::string Traceparent() const;
};

// A `traceparent` value; nullopt when it is malformed (the receiver then starts a new trace, as
// the specification says). A version above 00 is read as 00 when its first four fields are.
std::optional<TraceContext> ParseTraceparent(absl::string_view value);

// A tracestate value to keep: up to 512 printable ASCII characters; "" otherwise (dropped, as
// the specification allows).
std::string CheckedTracestate(absl::string_view value);

// Fresh random non-zero ids.
TraceId NewTraceId();
SpanId NewSpanId();

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_TRACE_CONTEXT_H_
