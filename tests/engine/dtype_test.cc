// FirstNonFinite against the obvious reference: convert every element to float and ask
// std::isfinite, for every 16-bit pattern and for random 32-bit ones.
#include "lib/engine/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace yoco {
namespace {

TEST(FirstNonFiniteTest, AgreesWithIsfiniteForEvery16BitPattern) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const uint16_t h = static_cast<uint16_t>(bits);
      const float value = dtype == DType::kBF16 ? Bf16ToFloat(h) : F16ToFloat(h);
      const uint16_t data[3] = {0, h, 0};
      EXPECT_EQ(FirstNonFinite(dtype, data, 3), std::isfinite(value) ? -1 : 1)
          << DTypeName(dtype) << " " << bits;
    }
  }
}

TEST(FirstNonFiniteTest, AgreesWithIsfiniteForRandomFloats) {
  std::mt19937 rng(5);
  std::vector<uint32_t> data(100000);
  for (uint32_t& x : data) x = rng();
  int64_t want = -1;
  for (size_t i = 0; i < data.size() && want < 0; ++i) {
    float f;
    std::memcpy(&f, &data[i], 4);
    if (!std::isfinite(f)) want = static_cast<int64_t>(i);
  }
  ASSERT_GE(want, 0);  // random bits hit an all-ones exponent about once in 256
  EXPECT_EQ(FirstNonFinite(DType::kF32, data.data(), static_cast<int64_t>(data.size())), want);
  const std::vector<float> finite = {0.0f, -1.5f, 3e38f, -3e38f, 1e-45f};
  EXPECT_EQ(FirstNonFinite(DType::kF32, finite.data(), 5), -1);
}

}  // namespace
}  // namespace yoco
