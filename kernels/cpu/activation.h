// Element-wise activations of the reference: SiLU-gated products and logsigmoid.
#ifndef YOCO_KERNELS_CPU_ACTIVATION_H_
#define YOCO_KERNELS_CPU_ACTIVATION_H_

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {

// a[i] = silu(a[i]) · b[i] = a·σ(a)·b: the FFN's swiglu(fc1, gate) and gRet's swish output gate
// swiglu(g, o), both with the activation on the first argument.
inline void SiluMul(float* a, const float* b, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // The loop below on 16 lanes: the same operations on each value, so the same bits.
  const __m512 one16 = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(a + i);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    _mm512_storeu_ps(
        a + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one16, e)), _mm512_loadu_ps(b + i)));
  }
#endif
#ifdef YOCO_AVX2
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i);
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    _mm256_storeu_ps(
        a + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(b + i)));
  }
#endif
  for (; i < n; ++i) a[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

// log σ(x), stable for large |x|.
inline float LogSigmoid(float x) {
  return std::fmin(x, 0.0f) - std::log1p(std::exp(-std::fabs(x)));
}

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ACTIVATION_H_
