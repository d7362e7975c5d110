// RMSNorm; the sum of squares runs in eight fp32 lanes and is finished in double.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {

void RmsNorm(const float* x, int64_t rows, int64_t n, int64_t stride, const float* weight,
             float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * stride;
    float* yr = y + r * stride;
    double sum = 0;
    int64_t i0 = 0;
#ifdef YOCO_AVX2
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i0 + 16 <= n; i0 += 16) {
      const __m256 a = _mm256_loadu_ps(xr + i0), b = _mm256_loadu_ps(xr + i0 + 8);
      acc0 = _mm256_fmadd_ps(a, a, acc0);
      acc1 = _mm256_fmadd_ps(b, b, acc1);
    }
    sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
#endif
    for (int64_t i = i0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
    if (weight) {
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * weight[i];
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
    }
  }
}

}  // namespace yoco::cpu
