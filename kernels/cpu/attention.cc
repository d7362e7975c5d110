// Single-query softmax attention with a max-subtracted exponent.
#include "kernels/cpu/attention.h"

#include <cmath>

namespace yoco::cpu {

void AttendOneQuery(const float* q, int d, const float* keys, const float* values, int64_t n,
                    int64_t ld, float scale, float* scores, float* out) {
  float max_score = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    const float* kr = keys + i * ld;
    float dot = 0.0f;
    for (int j = 0; j < d; ++j) dot += q[j] * kr[j];
    scores[i] = dot * scale;
    if (scores[i] > max_score) max_score = scores[i];
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    scores[i] = std::exp(scores[i] - max_score);
    sum += scores[i];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < d; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float w = scores[i] * inv;
    const float* vr = values + i * ld;
    for (int j = 0; j < d; ++j) out[j] += w * vr[j];
  }
}

void AttendGqa(const float* q, int q_heads, int kv_heads, int d, const float* keys,
               const float* values, int64_t n, float scale, float* scores, float* out) {
  const int group = q_heads / kv_heads;
  const int64_t ld = int64_t{kv_heads} * d;
  for (int h = 0; h < q_heads; ++h) {
    const int kvh = h / group;
    AttendOneQuery(q + int64_t{h} * d, d, keys + int64_t{kvh} * d, values + int64_t{kvh} * d, n, ld,
                   scale, scores, out + int64_t{h} * d);
  }
}

}  // namespace yoco::cpu
