// The CUDA RMSNorm against the CPU kernel; skipped on machines without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "kernels/cpu/rms_norm.h"
#include "kernels/cuda/rms_norm.h"
#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

TEST(CudaRmsNormTest, MatchesCpuKernel) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 7;
  const int n = 1000;
  const auto x = testing::RandomFloats(rows * n, 1, -3.0f, 3.0f);
  const auto w = testing::RandomFloats(n, 2, 0.5f, 1.5f);
  std::vector<float> want(rows * n), got(rows * n);
  cpu::RmsNorm(x.data(), rows, n, n, w.data(), 1e-5f, want.data());
  float *dx, *dw, *dy;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dx), x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dw), w.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dy), x.size() * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
  ASSERT_EQ(cuda::RmsNorm(dx, rows, n, dw, 1e-5f, dy, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), dy, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-6);
}

}  // namespace
}  // namespace yoco
