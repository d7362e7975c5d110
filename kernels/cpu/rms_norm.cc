// RMSNorm; the sum of squares is accumulated in double so the result does not depend on the
// vector length's rounding.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

namespace yoco::cpu {

void RmsNorm(const float* x, int64_t rows, int64_t n, int64_t stride, const float* weight, float eps,
             float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * stride;
    float* yr = y + r * stride;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
    if (weight) {
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * weight[i];
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
    }
  }
}

}  // namespace yoco::cpu
