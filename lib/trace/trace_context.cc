// W3C traceparent parsing and formatting (https://www.w3.org/TR/trace-context/#traceparent-header).
#include "lib/trace/trace_context.h"

#include <algorithm>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"

namespace yoco {
namespace {

bool IsLowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

template <size_t N>
bool FromHex(absl::string_view hex, std::array<uint8_t, N>* out) {
  if (hex.size() != 2 * N || !IsLowerHex(hex)) return false;
  const std::string bytes = absl::HexStringToBytes(hex);
  std::copy(bytes.begin(), bytes.end(), out->begin());
  return true;
}

}  // namespace

bool TraceContext::valid() const { return !AllZero(trace_id) && !AllZero(span_id); }

std::string TraceContext::TraceIdHex() const { return Hex(trace_id); }

std::string TraceContext::SpanIdHex() const { return Hex(span_id); }

std::string TraceContext::Traceparent() const {
  return "00-" + TraceIdHex() + "-" + SpanIdHex() + (sampled ? "-01" : "-00");
}

std::optional<TraceContext> ParseTraceparent(absl::string_view value) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  constexpr size_t kLength = 55;
  if (value.size() < kLength) return std::nullopt;
  const absl::string_view version = value.substr(0, 2);
  if (!IsLowerHex(version) || version == "ff") return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append fields after a '-'.
  if (version == "00" ? value.size() != kLength : value.size() > kLength && value[kLength] != '-') {
    return std::nullopt;
  }
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  TraceContext context;
  const absl::string_view flags = value.substr(53, 2);
  if (!FromHex(value.substr(3, 32), &context.trace_id) ||
      !FromHex(value.substr(36, 16), &context.span_id) || !IsLowerHex(flags)) {
    return std::nullopt;
  }
  if (!context.valid()) return std::nullopt;
  context.sampled = (absl::HexStringToBytes(flags)[0] & 0x01) != 0;
  return context;
}

std::string CheckedTracestate(absl::string_view value) {
  if (value.size() > 512) return "";
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return "";
  }
  return std::string(value);
}

namespace {

template <size_t N>
std::array<uint8_t, N> RandomId() {
  thread_local absl::BitGen gen;
  std::array<uint8_t, N> id;
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t word = absl::Uniform<uint64_t>(gen);
      std::memcpy(id.data() + i, &word, std::min<size_t>(8, N - i));
    }
  } while (AllZero(id));
  return id;
}

}  // namespace

TraceId NewTraceId() { return RandomId<16>(); }

SpanId NewSpanId() { return RandomId<8>(); }

}  // namespace yoco
