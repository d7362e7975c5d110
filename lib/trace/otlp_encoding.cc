// Protobuf's wire format, as much of it as OTLP traces use: varints, length-delimited fields
// (strings, bytes, nested messages), fixed64 times and doubles. Field numbers are those of
// opentelemetry-proto's trace/v1, common/v1 and resource/v1 messages.
#include "lib/trace/otlp_encoding.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace yoco {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

class ProtoWriter {
 public:
  void Varint(uint32_t field, uint64_t value) {
    Tag(field, kVarint);
    RawVarint(value);
  }
  void Bytes(uint32_t field, absl::string_view bytes) {
    Tag(field, kLengthDelimited);
    RawVarint(bytes.size());
    out_.append(bytes.data(), bytes.size());
  }
  void Message(uint32_t field, const ProtoWriter& message) { Bytes(field, message.out_); }
  void Fixed64(uint32_t field, uint64_t value) {
    Tag(field, kFixed64);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(value >> (8 * i)));
  }
  void Double(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    Fixed64(field, bits);
  }
  const std::string& str() const { return out_; }

 private:
  void Tag(uint32_t field, WireType type) { RawVarint((uint64_t{field} << 3) | type); }
  void RawVarint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }

  std::string out_;
};

template <size_t N>
absl::string_view AsBytes(const std::array<uint8_t, N>& id) {
  return absl::string_view(reinterpret_cast<const char*>(id.data()), N);
}

uint64_t UnixNanos(absl::Time t) { return static_cast<uint64_t>(absl::ToUnixNanos(t)); }

// common.v1.KeyValue { key = 1; AnyValue value = 2 }; AnyValue's oneof: string_value = 1,
// bool_value = 2, int_value = 3, double_value = 4.
ProtoWriter KeyValue(absl::string_view key, const AttributeValue& value) {
  ProtoWriter any;
  std::visit(
      [&any](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          any.Bytes(1, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          any.Varint(2, v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          any.Varint(3, static_cast<uint64_t>(v));  // int64: two's complement, 10 bytes if < 0
        } else {
          any.Double(4, v);
        }
      },
      value);
  ProtoWriter kv;
  kv.Bytes(1, key);
  kv.Message(2, any);
  return kv;
}

// trace.v1.Span.
ProtoWriter EncodeSpan(const SpanData& span) {
  ProtoWriter out;
  out.Bytes(1, AsBytes(span.trace_id));
  out.Bytes(2, AsBytes(span.span_id));
  if (!span.tracestate.empty()) out.Bytes(3, span.tracestate);
  if (span.parent_span_id != SpanId{}) out.Bytes(4, AsBytes(span.parent_span_id));
  out.Bytes(5, span.name);
  out.Varint(6, static_cast<uint64_t>(span.kind));
  out.Fixed64(7, UnixNanos(span.start));
  out.Fixed64(8, UnixNanos(span.end));
  for (const SpanAttribute& a : span.attributes) out.Message(9, KeyValue(a.key, a.value));
  for (const SpanEvent& e : span.events) {
    ProtoWriter event;  // Span.Event { time_unix_nano = 1; name = 2; attributes = 3 }
    event.Fixed64(1, UnixNanos(e.time));
    event.Bytes(2, e.name);
    for (const SpanAttribute& a : e.attributes) event.Message(3, KeyValue(a.key, a.value));
    out.Message(11, event);
  }
  if (span.error) {
    ProtoWriter status;  // Status { message = 2; code = 3 (STATUS_CODE_ERROR = 2) }
    status.Bytes(2, span.error_message);
    status.Varint(3, 2);
    out.Message(15, status);
  }
  return out;
}

}  // namespace

std::string EncodeOtlpTraces(const TraceResource& resource, absl::Span<const SpanData> spans) {
  ProtoWriter resource_message;  // resource.v1.Resource { attributes = 1 }
  resource_message.Message(1, KeyValue("service.name", resource.service_name));
  if (!resource.service_version.empty()) {
    resource_message.Message(1, KeyValue("service.version", resource.service_version));
  }
  ProtoWriter scope;  // common.v1.InstrumentationScope { name = 1; version = 2 }
  scope.Bytes(1, "yoco-serve");
  ProtoWriter scope_spans;  // trace.v1.ScopeSpans { scope = 1; spans = 2 }
  scope_spans.Message(1, scope);
  for (const SpanData& span : spans) scope_spans.Message(2, EncodeSpan(span));
  ProtoWriter resource_spans;  // trace.v1.ResourceSpans { resource = 1; scope_spans = 2 }
  resource_spans.Message(1, resource_message);
  resource_spans.Message(2, scope_spans);
  ProtoWriter request;  // collector.trace.v1.ExportTraceServiceRequest { resource_spans = 1 }
  request.Message(1, resource_spans);
  return request.str();
}

}  // namespace yoco
