// RMSNorm as the reference computes it: y = x * rsqrt(mean(x²) + eps), then × weight.
#ifndef YOCO_KERNELS_CPU_RMS_NORM_H_
#define YOCO_KERNELS_CPU_RMS_NORM_H_

#include <cstdint>

namespace yoco::cpu {

// Normalises `rows` vectors of length n (row stride `stride` for both x and y; x may equal y).
// `weight` [n] may be null (the per-head norm of gated retention has none).
void RmsNorm(const float* x, int64_t rows, int64_t n, int64_t stride, const float* weight,
             float eps, float* y);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_RMS_NORM_H_
