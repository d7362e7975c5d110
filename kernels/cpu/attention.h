// Softmax attention for the cross-decoder (GQA over the shared K/V), the SWA self-decoder and
// the Transformer baseline: one query per sequence (decode) or many causal queries (prefill).
#ifndef YOCO_KERNELS_CPU_ATTENTION_H_
#define YOCO_KERNELS_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace yoco::cpu {

// out[d] = softmax(scale · q·K[i] for i < n) · V, with K and V rows of stride `ld`.
// `scores` is scratch of n floats. REQUIRES: n >= 1.
void AttendOneQuery(const float* q, int d, const float* keys, const float* values, int64_t n,
                    int64_t ld, float scale, float* scores, float* out);

struct GqaShape {
  int q_heads = 0;
  int kv_heads = 0;  // query head h reads KV head h / (q_heads / kv_heads)
  int head_dim = 0;
};

// One token's query heads q [q_heads, d] over n keys/values [n, kv_heads, d] (scale 1/√d). Each
// KV row is read once for all the query heads that share it. `scores` holds q_heads·n floats.
void AttendGqa(const GqaShape& shape, const float* q, const float* keys, const float* values,
               int64_t n, float* scores, float* out);

// Causal attention of T queries at positions [p0, p0 + T) over keys/values at positions
// [0, p0 + T): q/out [T, q_heads·d] rows (strides ldq/ldo), keys/values [p0 + T, kv_heads·d]
// rows (stride ldkv). Aligned bottom-right: the query at position p sees keys (p − window, p]
// (all keys ≤ p when window is 0). Query blocks run as matrix products on the kernel threads.
void CausalAttention(const GqaShape& shape, int64_t p0, int64_t T, const float* q, int64_t ldq,
                     const float* keys, const float* values, int64_t ldkv, int64_t window,
                     float* out, int64_t ldo, std::vector<float>* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ATTENTION_H_
