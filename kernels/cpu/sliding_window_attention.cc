// The cached rows a query of this call can still see and the new rows are laid out
// contiguously, then one windowed causal attention runs over them.
#include "kernels/cpu/sliding_window_attention.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/decode_attention.h"

namespace yoco::cpu {

void SlidingWindowAttention(const SlidingWindowShape& shape, int64_t p0, int64_t T, const float* q,
                            const float* k, const float* v, float* ring_k, float* ring_v,
                            float* out, SlidingWindowScratch* scratch) {
  const int64_t D = int64_t{shape.heads} * shape.head_dim;
  const int64_t W = shape.window;
  const int64_t cached = std::min<int64_t>(p0, W - 1);  // positions [p0 − cached, p0)
  const int64_t n = cached + T;
  std::vector<float>& buffer = scratch->window;
  if (static_cast<int64_t>(buffer.size()) < 2 * n * D) buffer.resize(2 * n * D);
  float* wk = buffer.data();
  float* wv = wk + n * D;
  for (int64_t i = 0; i < cached; ++i) {
    const int64_t slot = (p0 - cached + i) % W;
    std::memcpy(wk + i * D, ring_k + slot * D, D * sizeof(float));
    std::memcpy(wv + i * D, ring_v + slot * D, D * sizeof(float));
  }
  std::memcpy(wk + cached * D, k, T * D * sizeof(float));
  std::memcpy(wv + cached * D, v, T * D * sizeof(float));
  const GqaShape gqa{shape.heads, shape.heads, shape.head_dim};
  if (T == 1) {  // decode: the new query sees every buffered row
    const DecodeQuery query{q, wk, wv, n, out};
    DecodeAttention(gqa, &query, 1, &scratch->decode);
  } else {
    CausalAttention(gqa, cached, T, q, D, wk, wv, D, W, out, D, &scratch->scores);
  }
  for (int64_t t = std::max<int64_t>(0, T - W); t < T; ++t) {
    const int64_t slot = (p0 + t) % W;
    std::memcpy(ring_k + slot * D, k + t * D, D * sizeof(float));
    std::memcpy(ring_v + slot * D, v + t * D, D * sizeof(float));
  }
}

}  // namespace yoco::cpu
