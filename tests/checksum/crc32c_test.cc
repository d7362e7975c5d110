// CRC-32C against a bit-at-a-time reference, by each path this CPU has: the SSE4.2 path's
// stripes and their joining, the folding path's 256-byte steps and final reduction, every
// length around their boundaries, unaligned starts, and extending across pieces.
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

std::string PathName(const ::testing::TestParamInfo<Crc32cPath>& info) {
  switch (info.param) {
    case Crc32cPath::kPortable:
      return "Portable";
    case Crc32cPath::kSse42:
      return "Sse42";
    case Crc32cPath::kFolding:
      return "Folding";
  }
  return "Unknown";
}

class Crc32cPathTest : public ::testing::TestWithParam<Crc32cPath> {
 protected:
  void SetUp() override {
    if (!Crc32cPathAvailable(GetParam())) GTEST_SKIP() << "this CPU lacks the instructions";
  }
  uint32_t Crc(const uint8_t* p, size_t n, uint32_t crc = 0) const {
    return Crc32cExtendBy(GetParam(), crc, p, n);
  }
};

TEST_P(Crc32cPathTest, CheckValueOfTheStandard) {
  const std::string s = "123456789";
  EXPECT_EQ(Crc(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xE3069283u);
  EXPECT_EQ(Crc(nullptr, 0), 0u);
}

TEST_P(Crc32cPathTest, EveryLengthAroundTheBoundariesMatchesTheReference) {
  constexpr size_t kStripe = 8 << 10;  // the SSE4.2 path's stripe
  const std::vector<uint8_t> data = RandomBytes(7 * kStripe + 64, 1);
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 80; ++n) lengths.push_back(n);
  // The folding path: its smallest buffer, one to three 256-byte steps past it, and tails.
  for (size_t n = 1000; n < 1024 + 3 * 256 + 70; ++n) lengths.push_back(n);
  for (size_t k : {1, 2, 3, 4, 6, 7}) {
    for (int d = -9; d <= 9; ++d) lengths.push_back(k * kStripe + d);
  }
  for (size_t n : lengths) {
    for (size_t offset : {0, 1, 3, 7}) {
      if (offset + n > data.size()) continue;
      const uint8_t* p = data.data() + offset;
      ASSERT_EQ(Crc(p, n), BitwiseCrc32c(p, n)) << "length " << n << " offset " << offset;
    }
  }
}

TEST_P(Crc32cPathTest, RandomBuffersMatchTheReference) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    const size_t n = rng() % (300 << 10);
    const std::vector<uint8_t> data = RandomBytes(n, round + 100);
    EXPECT_EQ(Crc(data.data(), n), BitwiseCrc32c(data.data(), n)) << "length " << n;
  }
}

// Every bit of every byte of a buffer the folding path takes changes the value: a constant that
// dropped part of a block would leave some bit unseen.
TEST_P(Crc32cPathTest, EveryFlippedBitChangesTheValue) {
  std::vector<uint8_t> data = RandomBytes(2048 + 37, 9);
  const uint32_t clean = Crc(data.data(), data.size());
  for (size_t at = 0; at < data.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      data[at] ^= static_cast<uint8_t>(1 << bit);
      ASSERT_NE(Crc(data.data(), data.size()), clean) << "byte " << at << " bit " << bit;
      data[at] ^= static_cast<uint8_t>(1 << bit);
    }
  }
}

TEST_P(Crc32cPathTest, ExtendingPieceByPieceEqualsTheWhole) {
  const std::vector<uint8_t> data = RandomBytes(200 << 10, 3);
  const uint32_t whole = BitwiseCrc32c(data.data(), data.size());
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    uint32_t crc = 0;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % (60 << 10));
      crc = Crc(data.data() + at, n, crc);
      at += n;
    }
    EXPECT_EQ(crc, whole);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Crc32cPathTest,
                         ::testing::Values(Crc32cPath::kPortable, Crc32cPath::kSse42,
                                           Crc32cPath::kFolding),
                         PathName);

// What callers get: the fastest path, the same value.
TEST(Crc32cTest, TheFastestPathMatchesTheReference) {
  const std::vector<uint8_t> data = RandomBytes((1 << 20) + 13, 5);
  EXPECT_EQ(Crc32c(data.data(), data.size()), BitwiseCrc32c(data.data(), data.size()));
  EXPECT_EQ(Crc32cExtend(Crc32c(data.data(), 5000), data.data() + 5000, data.size() - 5000),
            BitwiseCrc32c(data.data(), data.size()));
}

}  // namespace
}  // namespace yoco
