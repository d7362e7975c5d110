// Deterministic payloads for transport tests: a sender fills, a receiver checks, so "arrived
// intact" is checked byte for byte and not only by the transport's own checksum.
#ifndef YOCO_TESTS_TRANSPORT_PAYLOAD_PATTERN_H_
#define YOCO_TESTS_TRANSPORT_PAYLOAD_PATTERN_H_

#include <cstdint>
#include <cstring>

namespace yoco::testing {

inline uint64_t PatternWord(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + i;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 27);
}

inline void FillPattern(uint8_t* data, uint64_t size, uint64_t seed) {
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t w = PatternWord(seed, i / 8);
    std::memcpy(data + i, &w, 8);
  }
  for (; i < size; ++i) data[i] = static_cast<uint8_t>(PatternWord(seed, i / 8) >> (8 * (i % 8)));
}

inline bool CheckPattern(const uint8_t* data, uint64_t size, uint64_t seed) {
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    if (w != PatternWord(seed, i / 8)) return false;
  }
  for (; i < size; ++i) {
    if (data[i] != static_cast<uint8_t>(PatternWord(seed, i / 8) >> (8 * (i % 8)))) return false;
  }
  return true;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_TRANSPORT_PAYLOAD_PATTERN_H_
