// Causal softmax attention of many queries (prefill) for the cross-decoder (GQA over the shared
// K/V), the SWA self-decoder and the Transformer baseline. One query per sequence (decode) is
// decode_attention.h.
#ifndef YOCO_KERNELS_CPU_ATTENTION_H_
#define YOCO_KERNELS_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace yoco::cpu {

struct GqaShape {
  int q_heads = 0;
  int kv_heads = 0;  // query head h reads KV head h / (q_heads / kv_heads)
  int head_dim = 0;
};

// Causal attention of T queries at positions [p0, p0 + T) over keys/values at positions
// [0, p0 + T): q/out [T, q_heads·d] rows (strides ldq/ldo), keys/values [p0 + T, kv_heads·d]
// rows (stride ldkv). Aligned bottom-right: the query at position p sees keys (p − window, p]
// (all keys ≤ p when window is 0). Query blocks run as matrix products on the kernel threads.
void CausalAttention(const GqaShape& shape, int64_t p0, int64_t T, const float* q, int64_t ldq,
                     const float* keys, const float* values, int64_t ldkv, int64_t window,
                     float* out, int64_t ldo, std::vector<float>* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ATTENTION_H_
