// The cached rows a query of this call can still see and the new rows are laid out
// contiguously, so every query attends over one contiguous range.
#include "kernels/cpu/sliding_window_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention.h"

namespace yoco::cpu {

void SlidingWindowAttention(const SlidingWindowShape& shape, int64_t p0, int64_t T, const float* q,
                            const float* k, const float* v, float* ring_k, float* ring_v,
                            float* out, std::vector<float>* scratch) {
  const int64_t D = int64_t{shape.heads} * shape.head_dim;
  const int64_t W = shape.window;
  const int64_t cached = std::min<int64_t>(p0, W - 1);  // positions [p0 − cached, p0)
  const int64_t n = cached + T;
  if (static_cast<int64_t>(scratch->size()) < 2 * n * D + n) scratch->resize(2 * n * D + n);
  float* wk = scratch->data();
  float* wv = wk + n * D;
  float* scores = wv + n * D;
  for (int64_t i = 0; i < cached; ++i) {
    const int64_t slot = (p0 - cached + i) % W;
    std::memcpy(wk + i * D, ring_k + slot * D, D * sizeof(float));
    std::memcpy(wv + i * D, ring_v + slot * D, D * sizeof(float));
  }
  std::memcpy(wk + cached * D, k, T * D * sizeof(float));
  std::memcpy(wv + cached * D, v, T * D * sizeof(float));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t last = cached + t;
    const int64_t first = std::max<int64_t>(0, last - W + 1);
    for (int h = 0; h < shape.heads; ++h) {
      const int64_t off = int64_t{h} * shape.head_dim;
      AttendOneQuery(q + t * D + off, shape.head_dim, wk + first * D + off, wv + first * D + off,
                     last - first + 1, D, scale, scores, out + t * D + off);
    }
  }
  for (int64_t t = std::max<int64_t>(0, T - W); t < T; ++t) {
    const int64_t slot = (p0 + t) % W;
    std::memcpy(ring_k + slot * D, k + t * D, D * sizeof(float));
    std::memcpy(ring_v + slot * D, v + t * D, D * sizeof(float));
  }
}

}  // namespace yoco::cpu
