// Element-wise activations of the reference: SiLU-gated products and logsigmoid.
#ifndef YOCO_KERNELS_CPU_ACTIVATION_H_
#define YOCO_KERNELS_CPU_ACTIVATION_H_

#include <cmath>
#include <cstdint>

namespace yoco::cpu {

// a[i] = silu(a[i]) · b[i] = a·σ(a)·b: the FFN's swiglu(fc1, gate) and gRet's swish output gate
// swiglu(g, o), both with the activation on the first argument.
inline void SiluMul(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

// log σ(x), stable for large |x|.
inline float LogSigmoid(float x) {
  return std::fmin(x, 0.0f) - std::log1p(std::exp(-std::fabs(x)));
}

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ACTIVATION_H_
