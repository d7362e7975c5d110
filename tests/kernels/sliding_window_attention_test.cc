// Sliding-window attention, called in pieces through its ring buffer, against a direct double
// evaluation over the whole sequence.
#include "kernels/cpu/sliding_window_attention.h"

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

using testing::RandomFloats;
using testing::ToMat;

struct WindowCase {
  int64_t window;
  std::vector<int64_t> pieces;  // lengths of successive calls
};

class SlidingWindowTest : public ::testing::TestWithParam<WindowCase> {};

TEST_P(SlidingWindowTest, PiecewiseCallsMatchWholeSequenceReference) {
  const WindowCase c = GetParam();
  const int heads = 2, d = 32;
  const int64_t D = heads * d;
  int64_t T = 0;
  for (int64_t n : c.pieces) T += n;
  const auto q = RandomFloats(T * D, 21, -2.0f, 2.0f);
  const auto k = RandomFloats(T * D, 22);
  const auto v = RandomFloats(T * D, 23);
  std::vector<float> ring_k(c.window * D, 0.0f), ring_v(c.window * D, 0.0f), out(T * D);
  cpu::SlidingWindowScratch scratch;
  const cpu::SlidingWindowShape shape{heads, d, c.window};
  int64_t p0 = 0;
  for (int64_t n : c.pieces) {
    cpu::SlidingWindowAttention(shape, p0, n, q.data() + p0 * D, k.data() + p0 * D,
                                v.data() + p0 * D, ring_k.data(), ring_v.data(),
                                out.data() + p0 * D, &scratch);
    p0 += n;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t first = std::max<int64_t>(0, t - c.window + 1);  // W keys including itself
    for (int h = 0; h < heads; ++h) {
      const std::vector<double> qd(q.begin() + t * D + h * d, q.begin() + t * D + (h + 1) * d);
      const auto want =
          reference::Attention(qd, ToMat(k.data() + first * D, t - first + 1, d, D, h * d),
                               ToMat(v.data() + first * D, t - first + 1, d, D, h * d), scale);
      for (int j = 0; j < d; ++j) ASSERT_NEAR(out[t * D + h * d + j], want[j], 1e-5) << "t=" << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, SlidingWindowTest,
                         ::testing::Values(WindowCase{16, {100}},
                                           WindowCase{16, {5, 1, 1, 40, 1, 20}},
                                           WindowCase{64, {63, 1, 1, 70}}, WindowCase{1, {10, 3}},
                                           WindowCase{200, {150, 1, 49}}));

}  // namespace
}  // namespace yoco
