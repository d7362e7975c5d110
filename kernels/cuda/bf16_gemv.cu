// One warp per weight row: each lane reads 8 bf16 (16 bytes) at a time along the row, widens
// them and multiplies them into every activation row, which the block stages in shared memory
// 1024 columns at a time; the lanes' sums meet in a warp reduction. A fused launch numbers the
// blocks of its matrices one after another; a block finds its matrix from that numbering.
#include "kernels/cuda/bf16_gemv.h"

namespace yoco::cuda {
namespace {

constexpr int kWarps = 8;  // weight rows per block
constexpr int kColumns = 1024;

// The matrices of one launch, passed by value (kernel parameters, so a captured graph keeps
// them): matrix i owns blocks [first_block[i], first_block[i + 1]).
struct GemvPlan {
  const __nv_bfloat16* w[kMaxFusedGemvs];
  int64_t rows[kMaxFusedGemvs];
  float* y[kMaxFusedGemvs];
  int64_t first_block[kMaxFusedGemvs + 1];
  int count;
};

template <int M>
__global__ void __launch_bounds__(kWarps * 32)
    GemvKernel(GemvPlan plan, int cols, const float* x, bool accumulate) {
  __shared__ __align__(16) float xs[M * kColumns];
  int i = 0;
  while (i + 1 < plan.count && blockIdx.x >= plan.first_block[i + 1]) ++i;
  const __nv_bfloat16* w = plan.w[i];
  const int64_t rows = plan.rows[i];
  float* y = plan.y[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = (int64_t{blockIdx.x} - plan.first_block[i]) * kWarps + warp;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  for (int c0 = 0; c0 < cols; c0 += kColumns) {
    const int n = cols - c0 < kColumns ? cols - c0 : kColumns;
    __syncthreads();  // the previous chunk's readers are done
    for (int i = threadIdx.x; i < M * n; i += blockDim.x) {
      const int m = i / n, c = i % n;
      xs[m * kColumns + c] = x[int64_t{m} * cols + c0 + c];
    }
    __syncthreads();
    if (row >= rows) continue;
    const uint4* wr = reinterpret_cast<const uint4*>(w + row * cols + c0);
#pragma unroll 2
    for (int c = lane * 8; c < n; c += 32 * 8) {
      const uint4 packed = wr[c / 8];
      const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&packed);
      float wf[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(pairs[j]);
        wf[2 * j] = f.x;
        wf[2 * j + 1] = f.y;
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float4 a = *reinterpret_cast<const float4*>(xs + m * kColumns + c);
        const float4 b = *reinterpret_cast<const float4*>(xs + m * kColumns + c + 4);
        acc[m] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x +
                  wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
      }
    }
  }
  if (row >= rows) return;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = acc[m];
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
      float* out = y + int64_t{m} * rows + row;
      *out = accumulate ? *out + s : s;
    }
  }
}

template <int M>
cudaError_t Launch(const GemvPlan& plan, int64_t cols, const float* x, bool accumulate,
                   cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(plan.first_block[plan.count]);
  GemvKernel<M><<<blocks, kWarps * 32, 0, stream>>>(plan, static_cast<int>(cols), x, accumulate);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Bf16GemvFused(const Bf16GemvOutput* outputs, int count, int64_t cols, const float* x,
                          int m, bool accumulate, cudaStream_t stream) {
  if (count < 1 || count > kMaxFusedGemvs || !Bf16GemvFits(m, cols)) return cudaErrorInvalidValue;
  GemvPlan plan{};
  plan.count = count;
  plan.first_block[0] = 0;
  for (int i = 0; i < count; ++i) {
    if (outputs[i].rows < 0) return cudaErrorInvalidValue;
    plan.w[i] = outputs[i].w;
    plan.rows[i] = outputs[i].rows;
    plan.y[i] = outputs[i].y;
    plan.first_block[i + 1] = plan.first_block[i] + (outputs[i].rows + kWarps - 1) / kWarps;
  }
  if (plan.first_block[count] == 0) return cudaSuccess;
  switch (m) {
    case 1:
      return Launch<1>(plan, cols, x, accumulate, stream);
    case 2:
      return Launch<2>(plan, cols, x, accumulate, stream);
    case 3:
      return Launch<3>(plan, cols, x, accumulate, stream);
    case 4:
      return Launch<4>(plan, cols, x, accumulate, stream);
    case 5:
      return Launch<5>(plan, cols, x, accumulate, stream);
    case 6:
      return Launch<6>(plan, cols, x, accumulate, stream);
    case 7:
      return Launch<7>(plan, cols, x, accumulate, stream);
    default:
      return Launch<8>(plan, cols, x, accumulate, stream);
  }
}

cudaError_t Bf16Gemv(const __nv_bfloat16* w, int64_t rows, int64_t cols, const float* x, int m,
                     float* y, bool accumulate, cudaStream_t stream) {
  const Bf16GemvOutput output{w, rows, y};
  return Bf16GemvFused(&output, 1, cols, x, m, accumulate, stream);
}

}  // namespace yoco::cuda
