// RMSNorm on the GPU, numerically the CPU kernel's twin (fp32, the reference's formula).
#ifndef YOCO_KERNELS_CUDA_RMS_NORM_H_
#define YOCO_KERNELS_CUDA_RMS_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace yoco::cuda {

// y[r] = x[r] * rsqrt(mean(x[r]²) + eps) * weight for `rows` rows of n floats, all pointers in
// device memory; weight may be null. Returns the launch error, if any.
cudaError_t RmsNorm(const float* x, int64_t rows, int n, const float* weight, float eps, float* y,
                    cudaStream_t stream);

}  // namespace yoco::cuda

#endif  // YOCO_KERNELS_CUDA_RMS_NORM_H_
