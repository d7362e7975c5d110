// Softmax attention kernels against the double reference: grouped-query single queries
// (decode) and blocked causal queries (prefill), with offsets and windows.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

using testing::RandomFloats;
using testing::ToMat;

TEST(AttentionTest, GqaMatchesReferenceForEveryCausalPrefix) {
  const cpu::GqaShape shape{6, 2, 32};
  const int d = shape.head_dim;
  const int64_t n_keys = 150;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // Large-magnitude queries make the softmax peaky, which stresses the max subtraction.
  const std::vector<float> q = RandomFloats(shape.q_heads * d, 3, -4.0f, 4.0f);
  const std::vector<float> k = RandomFloats(n_keys * shape.kv_heads * d, 4);
  const std::vector<float> v = RandomFloats(n_keys * shape.kv_heads * d, 5);
  std::vector<float> scores(shape.q_heads * n_keys), out(shape.q_heads * d);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{77}, n_keys}) {
    cpu::AttendGqa(shape, q.data(), k.data(), v.data(), n, scores.data(), out.data());
    for (int h = 0; h < shape.q_heads; ++h) {
      const int kvh = h / (shape.q_heads / shape.kv_heads);
      const std::vector<double> qd(q.begin() + h * d, q.begin() + (h + 1) * d);
      const int64_t ld = shape.kv_heads * d;
      const auto want = reference::Attention(qd, ToMat(k.data(), n, d, ld, kvh * d), ToMat(v.data(), n, d, ld, kvh * d),
                                             scale);
      for (int j = 0; j < d; ++j) EXPECT_NEAR(out[h * d + j], want[j], 1e-5) << "n=" << n << " head " << h;
    }
  }
}

struct CausalCase {
  int64_t p0;
  int64_t T;
  int64_t window;
};

class CausalAttentionTest : public ::testing::TestWithParam<CausalCase> {};

TEST_P(CausalAttentionTest, MatchesReference) {
  const CausalCase c = GetParam();
  const cpu::GqaShape shape{4, 2, 32};
  const int d = shape.head_dim;
  const int64_t D = shape.q_heads * d, KV = shape.kv_heads * d;
  const int64_t n = c.p0 + c.T;
  const auto q = RandomFloats(c.T * D, 31, -3.0f, 3.0f);
  const auto k = RandomFloats(n * KV, 32);
  const auto v = RandomFloats(n * KV, 33);
  std::vector<float> out(c.T * D), scratch;
  cpu::CausalAttention(shape, c.p0, c.T, q.data(), D, k.data(), v.data(), KV, c.window, out.data(), D, &scratch);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t = 0; t < c.T; ++t) {
    const int64_t pos = c.p0 + t;
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
    for (int h = 0; h < shape.q_heads; ++h) {
      const int kvh = h / 2;
      const std::vector<double> qd(q.begin() + t * D + h * d, q.begin() + t * D + (h + 1) * d);
      const auto want = reference::Attention(qd, ToMat(k.data() + first * KV, pos - first + 1, d, KV, kvh * d),
                                             ToMat(v.data() + first * KV, pos - first + 1, d, KV, kvh * d), scale);
      for (int j = 0; j < d; ++j) ASSERT_NEAR(out[t * D + h * d + j], want[j], 2e-5) << "t=" << t << " h=" << h;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalAttentionTest,
                         ::testing::Values(CausalCase{0, 1, 0}, CausalCase{0, 64, 0}, CausalCase{0, 150, 0},
                                           CausalCase{37, 100, 0}, CausalCase{0, 200, 16},
                                           CausalCase{15, 130, 16}, CausalCase{300, 5, 0}));

}  // namespace
}  // namespace yoco
