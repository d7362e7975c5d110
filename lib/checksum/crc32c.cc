// CRC-32C: hardware paths (carry-less multiplication, the SSE4.2 crc32 instruction) picked at
// run time, and a portable table-driven path that defines the value.
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

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// Folding. The crc32 instruction reads 8 bytes a cycle at best (~16 GB/s here), which made
// the checksum a third of the CPU time of moving a bundle part. Carry-less multiplication reads
// 64 bytes per instruction: the register, read as a polynomial over GF(2), only matters modulo
// P, so a 128-bit block followed by D more bits contributes block * t^D mod P, which two
// multiplications by constants bring to at most 95 bits, XORed into the block D bits later.
// Four 512-bit accumulators (sixteen 128-bit blocks) move 256 bytes a step; at the end their
// blocks are folded into one, whose CRC the crc32 instruction takes (it is congruent to the
// message read so far), and what is left of the buffer follows on the instruction.
//
// In the reflected bit order, a block's bit i (of its 128, from the first byte's lowest bit)
// is the coefficient of t^(127-i). Its low 64 bits are L with X = L * t^64 + H, each read as
// sum(bit j * t^(63-j)). A 64-bit constant stored the same way multiplies to a product whose
// integer bit m is the coefficient of t^(126-m): one power of t short of the block's own
// order. Hence the constants t^(63+D) (for L) and t^(D-1) (for H).

// t^e mod P, bit i the coefficient of t^i.
constexpr uint32_t PowerModP(int e) {
  uint64_t r = 1;
  for (int i = 0; i < e; ++i) {
    r <<= 1;
    if (r >> 32) r ^= 0x11EDC6F41ull;  // P, the polynomial kPolyReflected reverses
  }
  return static_cast<uint32_t>(r);
}

// A polynomial of degree < 32 stored as multiplication constants are: t^i at bit 63 - i.
constexpr uint64_t AsFoldConstant(uint32_t poly) {
  uint64_t stored = 0;
  for (int i = 0; i < 32; ++i) {
    if (poly >> i & 1) stored |= uint64_t{1} << (63 - i);
  }
  return stored;
}

struct FoldConstants {
  uint64_t low, high;  // for the block's first and second 64 bits
};

constexpr FoldConstants FoldBy(int bits) {
  return {AsFoldConstant(PowerModP(63 + bits)), AsFoldConstant(PowerModP(bits - 1))};
}

constexpr FoldConstants kFold128 = FoldBy(128);    // one block to the next
constexpr FoldConstants kFold2048 = FoldBy(2048);  // across the four accumulators (256 bytes)

// Below this the crc32 instruction is as quick: folding has a fixed cost of ~20 multiplies.
constexpr size_t kMinFoldBytes = 1024;
static_assert(kMinFoldBytes >= 256, "the first step loads 256 bytes");

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) __m512i Fold512(__m512i x, __m512i k,
                                                                            const uint8_t* next) {
  const __m512i low = _mm512_clmulepi64_epi128(x, k, 0x00);
  const __m512i high = _mm512_clmulepi64_epi128(x, k, 0x11);
  return _mm512_ternarylogic_epi64(low, high, _mm512_loadu_si512(next), 0x96);  // a ^ b ^ c
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) uint32_t ExtendFolding(uint32_t crc,
                                                                                   const uint8_t* p,
                                                                                   size_t n) {
  if (n < kMinFoldBytes) return ExtendSse42(crc, p, n);
  // The register's starting value enters as an XOR into the first 32 bits of the message.
  __m512i x[4];
  for (int i = 0; i < 4; ++i) x[i] = _mm512_loadu_si512(p + 64 * i);
  x[0] = _mm512_xor_si512(x[0], _mm512_inserti32x4(_mm512_setzero_si512(),
                                                   _mm_cvtsi32_si128(static_cast<int>(crc)), 0));
  p += 256;
  n -= 256;
  const auto k_low = static_cast<long long>(kFold2048.low);
  const auto k_high = static_cast<long long>(kFold2048.high);
  const __m512i k2048 =
      _mm512_set_epi64(k_high, k_low, k_high, k_low, k_high, k_low, k_high, k_low);
  for (; n >= 256; p += 256, n -= 256) {
    for (int i = 0; i < 4; ++i) x[i] = Fold512(x[i], k2048, p + 64 * i);
  }
  alignas(64) uint8_t blocks[256];
  for (int i = 0; i < 4; ++i) _mm512_store_si512(blocks + 64 * i, x[i]);
  const __m128i k128 =
      _mm_set_epi64x(static_cast<long long>(kFold128.high), static_cast<long long>(kFold128.low));
  __m128i acc = _mm_load_si128(reinterpret_cast<const __m128i*>(blocks));
  for (int b = 1; b < 16; ++b) {
    const __m128i next = _mm_load_si128(reinterpret_cast<const __m128i*>(blocks + 16 * b));
    acc = _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(acc, k128, 0x00), _mm_clmulepi64_si128(acc, k128, 0x11)),
        next);
  }
  uint64_t c = __builtin_ia32_crc32di(0, static_cast<uint64_t>(_mm_cvtsi128_si64(acc)));
  c = __builtin_ia32_crc32di(c, static_cast<uint64_t>(_mm_extract_epi64(acc, 1)));
  return ExtendSse42(static_cast<uint32_t>(c), p, n);
}

bool HasFolding() {
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("vpclmulqdq") &&
                          __builtin_cpu_supports("pclmul") && HasSse42();
  return has;
}
#endif

}  // namespace

bool Crc32cPathAvailable(Crc32cPath path) {
  switch (path) {
    case Crc32cPath::kPortable:
      return true;
#if defined(__x86_64__)
    case Crc32cPath::kSse42:
      return HasSse42();
    case Crc32cPath::kFolding:
      return HasFolding();
#endif
    default:
      return false;
  }
}

uint32_t Crc32cExtendBy(Crc32cPath path, uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (path == Crc32cPath::kFolding) return ~ExtendFolding(crc, p, size);
  if (path == Crc32cPath::kSse42) return ~ExtendSse42(crc, p, size);
#endif
  return ~ExtendPortable(crc, p, size);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  static const Crc32cPath fastest = Crc32cPathAvailable(Crc32cPath::kFolding) ? Crc32cPath::kFolding
                                    : Crc32cPathAvailable(Crc32cPath::kSse42)
                                        ? Crc32cPath::kSse42
                                        : Crc32cPath::kPortable;
  return Crc32cExtendBy(fastest, crc, data, size);
}

}  // namespace yoco
