// The decode step's matrix products on the GPU: a few rows of fp32 activations times a bf16
// weight matrix, reading each weight once. Unlike a bf16 GEMM it keeps the activations in fp32,
// so a decode step multiplies exactly as the CPU engine does (fp32 products of widened weights).
#ifndef YOCO_KERNELS_CUDA_BF16_GEMV_H_
#define YOCO_KERNELS_CUDA_BF16_GEMV_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace yoco::cuda {

// Most activation rows Bf16Gemv takes; larger batches go to the tensor cores.
constexpr int kMaxGemvRows = 8;

// True when Bf16Gemv can run this shape: 1 ≤ m ≤ kMaxGemvRows, cols a multiple of 8 (whole
// 16-byte weight loads).
inline bool Bf16GemvFits(int64_t m, int64_t cols) {
  return m >= 1 && m <= kMaxGemvRows && cols % 8 == 0;
}

// y[m, rows] = x[m, cols] · Wᵀ (+ y when accumulate), W [rows, cols] bf16 row-major, x and y fp32
// row-major, all device memory. REQUIRES: Bf16GemvFits(m, cols); w 16-byte aligned.
cudaError_t Bf16Gemv(const __nv_bfloat16* w, int64_t rows, int64_t cols, const float* x, int m,
                     float* y, bool accumulate, cudaStream_t stream);

// One matrix of a fused product and where its result goes ([m, rows], as Bf16Gemv writes it).
struct Bf16GemvOutput {
  const __nv_bfloat16* w = nullptr;  // [rows, cols], 16-byte aligned
  int64_t rows = 0;
  float* y = nullptr;
};

// Most matrices one Bf16GemvFused call takes.
constexpr int kMaxFusedGemvs = 8;

// Bf16Gemv of several matrices of the same width over the same x, in one launch: a decode step's
// q/k/v/g projections (or the FFN's fc1 and gate) are each too small to keep the GPU's memory
// busy alone. Each output gets the same bits as its own Bf16Gemv. REQUIRES: 1 ≤ count ≤
// kMaxFusedGemvs; Bf16GemvFits(m, cols).
cudaError_t Bf16GemvFused(const Bf16GemvOutput* outputs, int count, int64_t cols, const float* x,
                          int m, bool accumulate, cudaStream_t stream);

}  // namespace yoco::cuda

#endif  // YOCO_KERNELS_CUDA_BF16_GEMV_H_
