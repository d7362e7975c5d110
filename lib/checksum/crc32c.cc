// CRC-32C: a hardware path (SSE4.2 crc32 instruction) picked at run time, and a portable
// table-driven path that defines the value.
//
// The crc32 instruction has a latency of three cycles and a throughput of one, so one stream of
// it runs at a third of what the core can do (~8 GB/s). Long buffers are cut into three
// interleaved stripes whose CRCs are computed side by side and then joined: the CRC register is
// linear over GF(2), so the register after stripes A then B is shift(crc(A)) ^ crc_from_0(B),
// where shift() is the register's update over |B| zero bytes, a fixed 32x32 bit matrix applied
// through four 256-entry tables.
#include "lib/checksum/crc32c.h"

#include <array>
#include <cstring>

namespace yoco {
namespace {

constexpr uint32_t kPolyReflected = 0x82F63B78u;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolyReflected : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

uint32_t ExtendPortable(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

// Bytes per stripe: long enough that joining costs nothing, short enough that a buffer of a few
// stripes (a 128 KB slice of K/V rows) still takes the fast path.
constexpr size_t kStripeBytes = 8 << 10;

// The register's update over kStripeBytes zero bytes, byte by byte of the register.
struct StripeShift {
  uint32_t table[4][256];

  uint32_t Apply(uint32_t c) const {
    return table[0][c & 0xFF] ^ table[1][(c >> 8) & 0xFF] ^ table[2][(c >> 16) & 0xFF] ^
           table[3][c >> 24];
  }
};

StripeShift MakeStripeShift() {
  // Column i of the matrix: the register 1 << i after kStripeBytes zeros (no data enters).
  uint32_t column[32];
  for (int i = 0; i < 32; ++i) {
    uint32_t c = uint32_t{1} << i;
    for (size_t k = 0; k < kStripeBytes; ++k) c = kTable[c & 0xFF] ^ (c >> 8);
    column[i] = c;
  }
  StripeShift s;
  for (int byte = 0; byte < 4; ++byte) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t out = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (v & (1u << bit)) out ^= column[8 * byte + bit];
      }
      s.table[byte][v] = out;
    }
  }
  return s;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint64_t ExtendWords(uint64_t c, const uint8_t* p, size_t words) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  static const StripeShift shift = MakeStripeShift();
  uint64_t c = crc;
  while (n >= 3 * kStripeBytes) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* p1 = p + kStripeBytes;
    const uint8_t* p2 = p + 2 * kStripeBytes;
    for (size_t i = 0; i < kStripeBytes; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p1 + i, 8);
      std::memcpy(&w2, p2 + i, 8);
      c = __builtin_ia32_crc32di(c, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
    }
    c = shift.Apply(shift.Apply(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^
        static_cast<uint32_t>(c2);
    p += 3 * kStripeBytes;
    n -= 3 * kStripeBytes;
  }
  c = ExtendWords(c, p, n / 8);
  p += n & ~size_t{7};
  n &= 7;
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --n;
  }
  return c32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (HasSse42()) return ~ExtendSse42(crc, p, size);
#endif
  return ~ExtendPortable(crc, p, size);
}

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size) {
  return ~ExtendPortable(~crc, static_cast<const uint8_t*>(data), size);
}

}  // namespace yoco
