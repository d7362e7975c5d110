// RMSNorm against the double reference, with and without weight.
#include "kernels/cpu/rms_norm.h"

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

TEST(RmsNormTest, MatchesReference) {
  const int64_t rows = 5, n = 300;
  const auto x = testing::RandomFloats(rows * n, 11, -3.0f, 3.0f);
  const auto w = testing::RandomFloats(n, 12, 0.5f, 1.5f);
  for (bool with_weight : {true, false}) {
    std::vector<float> y(rows * n);
    cpu::RmsNorm(x.data(), rows, n, n, with_weight ? w.data() : nullptr, 1e-5f, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> xd(x.begin() + r * n, x.begin() + (r + 1) * n);
      const std::vector<double> wd =
          with_weight ? std::vector<double>(w.begin(), w.end()) : std::vector<double>{};
      const auto want = reference::RmsNorm(xd, wd, 1e-5);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[r * n + i], want[i], 2e-6 * std::fabs(want[i]) + 1e-7);
    }
  }
}

TEST(RmsNormTest, InPlaceWithStride) {
  // The per-head norm runs in place over heads of a wider row.
  const int64_t n = 64;
  auto x = testing::RandomFloats(4 * n, 13);
  const auto original = x;
  cpu::RmsNorm(x.data(), 4, n, n, nullptr, 1e-5f, x.data());
  for (int64_t r = 0; r < 4; ++r) {
    const auto want =
        reference::RmsNorm({original.begin() + r * n, original.begin() + (r + 1) * n}, {}, 1e-5);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[r * n + i], want[i], 1e-5);
  }
}

}  // namespace
}  // namespace yoco
