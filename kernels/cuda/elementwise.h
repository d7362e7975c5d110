// Element-wise and row-copy kernels of the CUDA forward pass, each numerically the twin of the
// CPU code it replaces (fp32, same formulas). All pointers are device memory; each function
// returns the launch error, if any.
#ifndef YOCO_KERNELS_CUDA_ELEMENTWISE_H_
#define YOCO_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace yoco::cuda {

// out[r, :] = table[tokens[r], :] · scale, table [V, dim] in fp32 or bf16.
cudaError_t EmbedRows(const void* table, bool bf16, int dim, const int32_t* tokens, int64_t rows,
                      float scale, float* out, cudaStream_t stream);

// Interleaved RoPE in place on `heads` head vectors of `head_dim` at each row of x (row stride
// ld), row r at positions[r]; angles fp32 p·inv_freq[i], cos/sin taken in double as the CPU
// table does. Each result is then multiplied by post_scale (gRet's key scaling; 1 elsewhere).
cudaError_t ApplyRope(float* x, int64_t rows, int64_t ld, int heads, int head_dim,
                      const int32_t* positions, const float* inv_freq, float post_scale,
                      cudaStream_t stream);

// x = log σ(x) / 16: gRet's decay logits to log-decay.
cudaError_t LogSigmoidDecay(float* x, int64_t n, cudaStream_t stream);

// a = silu(a) · b.
cudaError_t SiluMul(float* a, const float* b, int64_t n, cudaStream_t stream);

// y = x rounded to bf16 (nearest even): the activations of a bf16 matrix product.
cudaError_t ToBf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream);

// dst[i, :] = src[rows[i], :] for rows of `dim` floats (row strides ld_src, ld_dst).
cudaError_t GatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int dim,
                       float* dst, int64_t ld_dst, cudaStream_t stream);

// One segment's rows to append to a destination: rows [row_begin, row_begin + count) of a source
// go to rows [dst_row, dst_row + count) of dst, or, when ring > 0, to row (dst_row + i) % ring.
struct RowCopy {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t count = 0;
  int64_t dst_row = 0;
  int64_t ring = 0;
};

// Runs `n` RowCopy descriptors (device array) of rows of `dim` floats, every row contiguous.
// max_count bounds every descriptor's count (the grid's height).
cudaError_t CopyRows(const RowCopy* copies, int n, int64_t max_count, int dim, cudaStream_t stream);

// dst[i] = std · N(0, 1) draws from a counter-based hash of (seed, i) (Box-Muller), fp32 or
// bf16: benchmark weights made on the device in milliseconds instead of on the host in minutes.
cudaError_t FillNormal(void* dst, bool bf16, int64_t n, uint64_t seed, float std,
                       cudaStream_t stream);

// dst[i] = value.
cudaError_t Fill(float* dst, int64_t n, float value, cudaStream_t stream);

}  // namespace yoco::cuda

#endif  // YOCO_KERNELS_CUDA_ELEMENTWISE_H_
