// Softmax attention of single query vectors over contiguous key/value rows. The cross-decoder
// (GQA over the shared K/V) and the sliding-window self-decoder both build on it.
#ifndef YOCO_KERNELS_CPU_ATTENTION_H_
#define YOCO_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

namespace yoco::cpu {

// out[d] = softmax(scale · q·K[i] for i < n) · V, with K and V rows of stride `ld`.
// `scores` is scratch of n floats. REQUIRES: n >= 1.
void AttendOneQuery(const float* q, int d, const float* keys, const float* values, int64_t n,
                    int64_t ld, float scale, float* scores, float* out);

// Grouped-query attention of one token's query heads: query head h reads KV head
// h / (q_heads / kv_heads). q is [q_heads, d]; keys/values are [n, kv_heads, d]; out is
// [q_heads, d].
void AttendGqa(const float* q, int q_heads, int kv_heads, int d, const float* keys,
               const float* values, int64_t n, float scale, float* scores, float* out);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ATTENTION_H_
