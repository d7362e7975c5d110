// Element-wise kernels: grid-stride loops over flat indices; nothing here is reordered against
// the CPU formulas, so results match it to the last rounding of expf/log1pf.
#include "kernels/cuda/elementwise.h"

namespace yoco::cuda {
namespace {

constexpr int kThreads = 256;

unsigned BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

__global__ void EmbedKernel(const void* table, bool bf16, int dim, const int32_t* tokens,
                            int64_t rows, float scale, float* out) {
  const int64_t n = rows * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / dim, c = i % dim;
    const int64_t src = int64_t{tokens[r]} * dim + c;
    const float v = bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[src])
                         : static_cast<const float*>(table)[src];
    out[i] = v * scale;
  }
}

__global__ void RopeKernel(float* x, int64_t rows, int64_t ld, int heads, int head_dim,
                           const int32_t* positions, const float* inv_freq, float post_scale) {
  const int half = head_dim / 2;
  const int64_t pairs_per_row = int64_t{heads} * half;
  const int64_t n = rows * pairs_per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / pairs_per_row;
    const int64_t j = i % pairs_per_row;
    const int h = static_cast<int>(j / half), f = static_cast<int>(j % half);
    const float angle = static_cast<float>(positions[r]) * inv_freq[f];
    const float c = static_cast<float>(cos(static_cast<double>(angle)));
    const float s = static_cast<float>(sin(static_cast<double>(angle)));
    float* v = x + r * ld + int64_t{h} * head_dim + 2 * f;
    const float x0 = v[0], x1 = v[1];
    float y0 = x0 * c - x1 * s;
    float y1 = x0 * s + x1 * c;
    if (post_scale != 1.0f) {
      y0 *= post_scale;
      y1 *= post_scale;
    }
    v[0] = y0;
    v[1] = y1;
  }
}

__global__ void LogSigmoidDecayKernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    x[i] = (fminf(v, 0.0f) - log1pf(expf(-fabsf(v)))) / 16.0f;
  }
}

__global__ void SiluMulKernel(float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    a[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
  }
}

__global__ void ToBf16Kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = __float2bfloat16_rn(x[i]);
  }
}

__global__ void GatherRowsKernel(const float* src, int64_t ld_src, const int64_t* rows, int64_t n,
                                 int dim, float* dst, int64_t ld_dst) {
  const int64_t total = n * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / dim, c = i % dim;
    dst[r * ld_dst + c] = src[rows[r] * ld_src + c];
  }
}

// blockIdx.y: descriptor; blockIdx.z * gridDim.x + blockIdx.x: row within it.
__global__ void CopyRowsKernel(const RowCopy* copies, int dim) {
  const RowCopy c = copies[blockIdx.y];
  for (int64_t row = blockIdx.x; row < c.count; row += gridDim.x) {
    const int64_t d = c.ring > 0 ? (c.dst_row + row) % c.ring : c.dst_row + row;
    const float* s = c.src + row * dim;
    float* t = c.dst + d * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) t[i] = s[i];
  }
}

__device__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void FillNormalKernel(void* dst, bool bf16, int64_t n, uint64_t seed, float std) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t h = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1.0p-24f;  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFF) * 0x1.0p-24f;
    const float v = std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (bf16) {
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(v);
    } else {
      static_cast<float*>(dst)[i] = v;
    }
  }
}

__global__ void FillKernel(float* dst, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = value;
  }
}

}  // namespace

cudaError_t FillNormal(void* dst, bool bf16, int64_t n, uint64_t seed, float std,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillNormalKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dst, bf16, n, seed, std);
  return cudaGetLastError();
}

cudaError_t Fill(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t EmbedRows(const void* table, bool bf16, int dim, const int32_t* tokens, int64_t rows,
                      float scale, float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  EmbedKernel<<<BlocksFor(rows * dim), kThreads, 0, stream>>>(table, bf16, dim, tokens, rows, scale,
                                                              out);
  return cudaGetLastError();
}

cudaError_t ApplyRope(float* x, int64_t rows, int64_t ld, int heads, int head_dim,
                      const int32_t* positions, const float* inv_freq, float post_scale,
                      cudaStream_t stream) {
  const int64_t n = rows * heads * (head_dim / 2);
  if (n == 0) return cudaSuccess;
  RopeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, rows, ld, heads, head_dim, positions,
                                                    inv_freq, post_scale);
  return cudaGetLastError();
}

cudaError_t LogSigmoidDecay(float* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  LogSigmoidDecayKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n);
  return cudaGetLastError();
}

cudaError_t SiluMul(float* a, const float* b, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SiluMulKernel<<<BlocksFor(n), kThreads, 0, stream>>>(a, b, n);
  return cudaGetLastError();
}

cudaError_t ToBf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ToBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, y);
  return cudaGetLastError();
}

cudaError_t GatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int dim,
                       float* dst, int64_t ld_dst, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  GatherRowsKernel<<<BlocksFor(n * dim), kThreads, 0, stream>>>(src, ld_src, rows, n, dim, dst,
                                                                ld_dst);
  return cudaGetLastError();
}

cudaError_t CopyRows(const RowCopy* copies, int n, int64_t max_count, int dim,
                     cudaStream_t stream) {
  if (n == 0 || max_count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(max_count < 4096 ? max_count : 4096),
                  static_cast<unsigned>(n));
  CopyRowsKernel<<<grid, kThreads, 0, stream>>>(copies, dim);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
