// CudaWeights: a model's matrices and norm weights copied to device memory as stored (fp32
// matrices stay fp32, bf16 stay bf16), row-major, with the linear layer y = x Wᵀ on cuBLAS.
#ifndef YOCO_LIB_ENGINE_CUDA_WEIGHTS_H_
#define YOCO_LIB_ENGINE_CUDA_WEIGHTS_H_

#include <cublas_v2.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/engine/device_buffer.h"
#include "lib/engine/model_weights.h"

namespace yoco {

struct DeviceMatrix {
  DeviceBuffer data;
  bool bf16 = false;
  int64_t rows = 0;  // out
  int64_t cols = 0;  // in
};

struct DeviceFfn {
  DeviceMatrix fc1, gate, fc2;
};

struct DeviceSelfLayer {
  DeviceBuffer mixer_norm;
  DeviceMatrix q, k, v, g, gt, out;
  DeviceBuffer ffn_norm;
  DeviceFfn ffn;
};

struct DeviceCrossLayer {
  DeviceBuffer mixer_norm;
  DeviceMatrix q, out;
  DeviceBuffer ffn_norm;
  DeviceFfn ffn;
};

struct CudaWeights {
  DeviceMatrix embed, output;
  std::vector<DeviceSelfLayer> self_layers;
  DeviceBuffer kv_norm;
  DeviceMatrix kv_k, kv_v;
  std::vector<DeviceCrossLayer> cross_layers;
  DeviceBuffer final_norm;
  int64_t bytes = 0;  // device bytes of all of the above

  // Copies every tensor of `weights` (shapes from `config`) to the current device.
  static absl::StatusOr<std::unique_ptr<CudaWeights>> Upload(const ModelConfig& config,
                                                             const ModelWeights& weights);

  // Random weights made on the device (matrices ~ N(0, std²), norms 1) for benchmarks of shapes
  // too large to generate and upload from the host in reasonable time.
  static absl::StatusOr<std::unique_ptr<CudaWeights>> Random(const ModelConfig& config, bool bf16,
                                                             uint64_t seed, float std);
};

// y[m, w.rows] = x[m, w.cols] · Wᵀ (+ y when accumulate), fp32 x and y. bf16 matrices multiply
// up to kMaxGemvRows rows of fp32 x directly (Bf16Gemv: decode steps), larger m rounded to bf16
// (into `x_bf16`, grown as needed) on the tensor cores with fp32 accumulation; fp32 matrices
// run plain fp32 (no TF32).
absl::Status DeviceLinear(cublasHandle_t blas, cudaStream_t stream, const float* x, int64_t m,
                          const DeviceMatrix& w, float* y, bool accumulate, DeviceBuffer* x_bf16);

// One matrix of DeviceLinearFused and its output.
struct DeviceLinearOutput {
  const DeviceMatrix* w;
  float* y;
};

// DeviceLinear of each output over the same x (accumulate off). The matrices that take the GEMV
// (bf16, decode-sized m, the same width) run as one launch, each with the bits it would get
// alone; the others one by one.
absl::Status DeviceLinearFused(cublasHandle_t blas, cudaStream_t stream, const float* x, int64_t m,
                               absl::Span<const DeviceLinearOutput> outputs, DeviceBuffer* x_bf16);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_CUDA_WEIGHTS_H_
