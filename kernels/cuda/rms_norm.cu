// One block per row; the sum of squares is reduced in double to match the CPU kernel.
#include "kernels/cuda/rms_norm.h"

namespace yoco::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RmsNormKernel(const float* x, int n, const float* weight, float eps, float* y) {
  __shared__ double partial[kThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += static_cast<double>(xr[i]) * xr[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float scale = static_cast<float>(1.0 / sqrt(partial[0] / n + eps));
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = xr[i] * scale;
    yr[i] = weight ? v * weight[i] : v;
  }
}

}  // namespace

cudaError_t RmsNorm(const float* x, int64_t rows, int n, const float* weight, float eps, float* y,
                    cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, n, weight, eps, y);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
