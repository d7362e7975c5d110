// Grouped-query softmax attention (the cross-decoder's) against the double reference.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

using testing::RandomFloats;
using testing::ToMat;

TEST(AttentionTest, GqaMatchesReferenceForEveryCausalPrefix) {
  const int q_heads = 6, kv_heads = 2, d = 32;
  const int64_t n_keys = 150;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Large-magnitude queries make the softmax peaky, which stresses the max subtraction.
  const std::vector<float> q = RandomFloats(q_heads * d, 3, -4.0f, 4.0f);
  const std::vector<float> k = RandomFloats(n_keys * kv_heads * d, 4);
  const std::vector<float> v = RandomFloats(n_keys * kv_heads * d, 5);
  std::vector<float> scores(n_keys), out(q_heads * d);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{77}, n_keys}) {
    cpu::AttendGqa(q.data(), q_heads, kv_heads, d, k.data(), v.data(), n, scale, scores.data(), out.data());
    for (int h = 0; h < q_heads; ++h) {
      const int kvh = h / (q_heads / kv_heads);
      const std::vector<double> qd(q.begin() + h * d, q.begin() + (h + 1) * d);
      const auto want = reference::Attention(qd, ToMat(k.data(), n, d, kv_heads * d, kvh * d),
                                             ToMat(v.data(), n, d, kv_heads * d, kvh * d), scale);
      for (int j = 0; j < d; ++j) EXPECT_NEAR(out[h * d + j], want[j], 1e-5) << "n=" << n << " head " << h;
    }
  }
}

}  // namespace
}  // namespace yoco
