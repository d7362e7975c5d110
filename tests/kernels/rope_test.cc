// RoPE: the reference's linspace frequencies and interleaved pairs, against double math.
#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

TEST(RopeTest, LinspaceFrequencies) {
  const auto inv = cpu::RopeInverseFrequencies(128, 10000.0);
  ASSERT_EQ(inv.size(), 64u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[1], 0.86399, 1e-5);  // the standard θ^(−2i/d) would give 0.86596
  EXPECT_FLOAT_EQ(inv[63], 1e-4f);     // the last frequency is exactly 1/θ
}

TEST(RopeTest, RotationMatchesReference) {
  const int heads = 3, d = 64;
  cpu::RopeTable table(d, 10000.0);
  table.Reserve(3000);
  for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{299}, int64_t{2999}}) {
    auto x = testing::RandomFloats(heads * d, static_cast<uint32_t>(p) + 1);
    const auto original = x;
    cpu::ApplyRope(x.data(), heads, d, table.cos(p), table.sin(p));
    for (int h = 0; h < heads; ++h) {
      const auto want =
          reference::Rope({original.begin() + h * d, original.begin() + (h + 1) * d}, p, 10000.0);
      // fp32 angles p·ω carry a relative error ~6e-8, i.e. ~2e-4 rad at p = 3000.
      const double tol = 1e-6 + 1e-7 * static_cast<double>(p);
      for (int i = 0; i < d; ++i)
        ASSERT_NEAR(x[h * d + i], want[i], tol) << "p=" << p << " i=" << i;
    }
  }
}

TEST(RopeTest, TableGrowsOnDemand) {
  cpu::RopeTable table(16, 500000.0);
  table.Reserve(10);
  const float c5 = table.cos(5)[3];
  table.Prepare({5, 99999});  // past the table: computed for this call
  EXPECT_EQ(table.cos(5)[3], c5);
  EXPECT_NEAR(table.cos(99999)[0], std::cos(99999.0), 1e-3);
}

// Positions past the table are computed per Prepare, to the bits a table would hold.
TEST(RopeTest, PositionsPastTheTableGiveTheTableBits) {
  cpu::RopeTable small(32, 10000.0, /*tabulated=*/1000);
  cpu::RopeTable large(32, 10000.0, /*tabulated=*/int64_t{1} << 20);
  large.Reserve(300001);
  for (const std::vector<int64_t>& positions :
       {std::vector<int64_t>{1500, 999, 300000, 1500, 0}, std::vector<int64_t>{1000, 1001}}) {
    small.Prepare(positions);
    for (int64_t p : positions) {
      for (int i = 0; i < 16; ++i) {
        ASSERT_EQ(small.cos(p)[i], large.cos(p)[i]) << "p=" << p << " i=" << i;
        ASSERT_EQ(small.sin(p)[i], large.sin(p)[i]) << "p=" << p << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace yoco
