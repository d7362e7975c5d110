// Sliding-window causal attention of the SWA self-decoder: the query at position p sees the W
// keys at positions (p − W, p], itself included. Keys older than the call live in a ring
// buffer of W rows (the row of position p at slot p % W), which the call then advances.
#ifndef YOCO_KERNELS_CPU_SLIDING_WINDOW_ATTENTION_H_
#define YOCO_KERNELS_CPU_SLIDING_WINDOW_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/decode_attention.h"

namespace yoco::cpu {

struct SlidingWindowShape {
  int heads = 0;
  int head_dim = 0;
  int64_t window = 0;  // W
};

struct SlidingWindowScratch {
  std::vector<float> window;  // cached + new K and V rows, contiguous
  std::vector<float> scores;  // prefill
  DecodeAttentionScratch decode;
};

// q, k, v, out: [T, heads*head_dim] rows (k RoPE'd), for positions [p0, p0 + T). ring_k/ring_v:
// [W, heads*head_dim], holding the rows of positions [max(0, p0 − W), p0); on return they hold
// [max(0, p0 + T − W), p0 + T).
void SlidingWindowAttention(const SlidingWindowShape& shape, int64_t p0, int64_t T, const float* q,
                            const float* k, const float* v, float* ring_k, float* ring_v,
                            float* out, SlidingWindowScratch* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_SLIDING_WINDOW_ATTENTION_H_
