// CRC-32C against a bit-at-a-time reference: the fast path's stripes and their joining, every
// length around the stripe boundaries, unaligned starts, and extending across pieces.
#include "lib/checksum/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace yoco {
namespace {

// The definition: reflected polynomial 0x82F63B78, register starts and ends inverted.
uint32_t BitwiseCrc32c(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32cTest, CheckValueOfTheStandard) {
  const std::string s = "123456789";
  EXPECT_EQ(Crc32c(s.data(), s.size()), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, s.data(), s.size()), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(Crc32cTest, EveryLengthAroundTheStripesMatchesTheReference) {
  constexpr size_t kStripe = 8 << 10;  // crc32c.cc's stripe; other values are covered too
  const std::vector<uint8_t> data = RandomBytes(7 * kStripe + 64, 1);
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 80; ++n) lengths.push_back(n);
  for (size_t k : {1, 2, 3, 4, 6, 7}) {
    for (int d = -9; d <= 9; ++d) lengths.push_back(k * kStripe + d);
  }
  for (size_t n : lengths) {
    for (size_t offset : {0, 1, 3, 7}) {
      if (offset + n > data.size()) continue;
      const uint8_t* p = data.data() + offset;
      const uint32_t want = BitwiseCrc32c(p, n);
      ASSERT_EQ(Crc32c(p, n), want) << "length " << n << " offset " << offset;
      ASSERT_EQ(Crc32cExtendPortable(0, p, n), want) << "length " << n;
    }
  }
}

TEST(Crc32cTest, RandomBuffersMatchTheReference) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    const size_t n = rng() % (300 << 10);
    const std::vector<uint8_t> data = RandomBytes(n, round + 100);
    EXPECT_EQ(Crc32c(data.data(), n), BitwiseCrc32c(data.data(), n)) << "length " << n;
  }
}

TEST(Crc32cTest, ExtendingPieceByPieceEqualsTheWhole) {
  const std::vector<uint8_t> data = RandomBytes(200 << 10, 3);
  const uint32_t whole = Crc32c(data.data(), data.size());
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    uint32_t crc = 0, portable = 0;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % (60 << 10));
      crc = Crc32cExtend(crc, data.data() + at, n);
      portable = Crc32cExtendPortable(portable, data.data() + at, n);
      at += n;
    }
    EXPECT_EQ(crc, whole);
    EXPECT_EQ(portable, whole);
  }
}

TEST(Crc32cTest, ASingleFlippedBitChangesTheValue) {
  std::vector<uint8_t> data = RandomBytes(3 * (8 << 10) + 5, 9);
  const uint32_t clean = Crc32c(data.data(), data.size());
  for (size_t at : {size_t{0}, size_t{8 << 10}, size_t{(16 << 10) + 3}, data.size() - 1}) {
    data[at] ^= 0x10;
    EXPECT_NE(Crc32c(data.data(), data.size()), clean) << "byte " << at;
    data[at] ^= 0x10;
  }
}

}  // namespace
}  // namespace yoco
