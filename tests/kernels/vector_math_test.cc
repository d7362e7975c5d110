// The element-wise building blocks (softmax's exp-and-sum and max, the SiLU gate) against double
// precision, on random inputs whose lengths leave every path's tail; and the 16-lane paths of an
// AVX-512 build against the 8-lane ones, bit for bit.
#include "kernels/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"
#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

using testing::RandomFloats;

const int64_t kLengths[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 100, 512};

TEST(VectorMathTest, ExpShiftSumMatchesDouble) {
  for (int64_t n : kLengths) {
    std::vector<float> x = RandomFloats(n, 11 + n, -30.0f, 5.0f);
    const float shift = *std::max_element(x.begin(), x.end());
    double want_sum = 0, max_rel = 0;
    std::vector<double> want(n);
    // Of the fp32 difference, as the kernel forms it: the difference's own rounding (up to
    // 2e-6 of e^d at |d| = 35) is the input's, not the exponential's.
    for (int64_t i = 0; i < n; ++i) {
      const float d = x[i] - shift;
      want_sum += want[i] = std::exp(double{d});
    }
    std::vector<float> got = x;
    const float sum = cpu::ExpShiftSum(got.data(), n, shift);
    for (int64_t i = 0; i < n; ++i)
      max_rel = std::max(max_rel, std::fabs(got[i] - want[i]) / want[i]);
    EXPECT_LE(max_rel, 1e-6) << "n " << n;
    EXPECT_LE(std::fabs(sum - want_sum) / want_sum, 1e-6) << "n " << n;
  }
}

TEST(VectorMathTest, MaxOfIsTheLargestValue) {
  for (int64_t n : kLengths) {
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {  // the largest value in every position kind
      std::vector<float> x = RandomFloats(n, 21 + n, -5.0f, 5.0f);
      x[at] = 7.5f;
      EXPECT_EQ(cpu::MaxOf(x.data(), n), 7.5f) << "n " << n << " at " << at;
    }
  }
}

TEST(VectorMathTest, SiluMulMatchesDouble) {
  for (int64_t n : kLengths) {
    std::vector<float> a = RandomFloats(n, 31 + n, -12.0f, 12.0f);
    const std::vector<float> b = RandomFloats(n, 41 + n, -2.0f, 2.0f);
    std::vector<float> got = a;
    cpu::SiluMul(got.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = a[i] / (1.0 + std::exp(-double{a[i]})) * b[i];
      EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "n " << n << " i " << i;
    }
  }
}

// Values 16-23 of a 24-value call run the 8-lane path; the same values as the first eight of a
// 16-value call run the 16-lane path (with AVX-512; both the 8-lane path without it). Each
// value must come out with the same bits either way, as must the eight values' sum.
TEST(VectorMathTest, SixteenLanePathsGiveTheEightLaneBits) {
  const std::vector<float> x = RandomFloats(24, 51, -20.0f, 3.0f);
  const std::vector<float> b = RandomFloats(24, 52, -2.0f, 2.0f);
  std::vector<float> tail8 = x, head16(16, -40.0f);
  std::copy(x.begin() + 16, x.end(), head16.begin());
  cpu::ExpShiftSum(tail8.data(), 24, 0.5f);
  cpu::ExpShiftSum(head16.data(), 16, 0.5f);
  EXPECT_EQ(0, std::memcmp(tail8.data() + 16, head16.data(), 8 * sizeof(float)));

  std::vector<float> silu_tail = x, silu_head(16, 1.0f), b_head(16, 1.0f);
  std::copy(x.begin() + 16, x.end(), silu_head.begin());
  std::copy(b.begin() + 16, b.end(), b_head.begin());
  cpu::SiluMul(silu_tail.data(), b.data(), 24);
  cpu::SiluMul(silu_head.data(), b_head.data(), 16);
  EXPECT_EQ(0, std::memcmp(silu_tail.data() + 16, silu_head.data(), 8 * sizeof(float)));
}

}  // namespace
}  // namespace yoco
