// One block per (task, head). The chunkwise kernel keeps the head's d×d state in shared memory
// for the whole segment and walks its chunks in order: scores, outputs, then the state update,
// each a loop of independent dot products over shared memory. Shared rows are padded by one
// float so that threads reading different rows of one column hit different banks.
#include "kernels/cuda/gated_retention.h"

namespace yoco::cuda {
namespace {

constexpr int kThreads = 256;

struct ChunkLayout {
  int d, ld;  // head dim, padded row stride
  int64_t floats() const {
    return int64_t{d} * d + 3LL * kRetentionChunk * ld +
           int64_t{kRetentionChunk} * kRetentionChunk + 2LL * kRetentionChunk;
  }
};

__global__ void ChunkwiseKernel(RetentionShape shape, const RetentionTask* tasks, const float* q,
                                const float* k, const float* v, const float* log_decay,
                                float* out) {
  extern __shared__ float smem[];
  const RetentionTask task = tasks[blockIdx.x];
  const int h = blockIdx.y;
  const int d = shape.head_dim;
  const int ld = d + 1;
  const int C = kRetentionChunk;
  float* S = smem;              // [d, d]
  float* qs = S + d * d;        // [C, ld]
  float* ks = qs + C * ld;      // [C, ld]
  float* vs = ks + C * ld;      // [C, ld]
  float* scores = vs + C * ld;  // [C, C]
  float* cum = scores + C * C;  // [C] inclusive cumsum of log γ
  float* tail = cum + C;        // [C] exp(cum_last − cum_u)
  float* state = task.state + int64_t{h} * d * d;
  for (int i = threadIdx.x; i < d * d; i += blockDim.x) S[i] = state[i];

  for (int64_t c0 = 0; c0 < task.rows; c0 += C) {
    const int n = static_cast<int>(task.rows - c0 < C ? task.rows - c0 : C);
    const int64_t row0 = task.row_begin + c0;
    for (int i = threadIdx.x; i < n * d; i += blockDim.x) {
      const int r = i / d, c = i % d;
      const int64_t g = (row0 + r) * shape.ld + int64_t{h} * d + c;
      qs[r * ld + c] = q[g];
      ks[r * ld + c] = k[g];
      vs[r * ld + c] = v[g];
    }
    if (threadIdx.x == 0) {
      float acc = 0.0f;
      for (int j = 0; j < n; ++j) {
        acc += log_decay[(row0 + j) * shape.heads + h];
        cum[j] = acc;
      }
      for (int j = 0; j < n; ++j) tail[j] = expf(acc - cum[j]);
    }
    __syncthreads();
    // scores[j, u] = (q_j·k_u) exp(cum_j − cum_u) for u ≤ j.
    for (int i = threadIdx.x; i < n * n; i += blockDim.x) {
      const int j = i / n, u = i % n;
      float s = 0.0f;
      if (u <= j) {
        const float* qj = qs + j * ld;
        const float* ku = ks + u * ld;
        for (int c = 0; c < d; ++c) s += qj[c] * ku[c];
        s *= expf(cum[j] - cum[u]);
      }
      scores[j * C + u] = s;
    }
    __syncthreads();
    // o_j = Σ_u scores[j, u] v_u + exp(cum_j) q_j S.
    for (int i = threadIdx.x; i < n * d; i += blockDim.x) {
      const int j = i / d, c = i % d;
      float intra = 0.0f;
      for (int u = 0; u <= j; ++u) intra += scores[j * C + u] * vs[u * ld + c];
      float cross = 0.0f;
      const float* qj = qs + j * ld;
      for (int r = 0; r < d; ++r) cross += qj[r] * S[r * d + c];
      out[(row0 + j) * shape.ld + int64_t{h} * d + c] = intra + expf(cum[j]) * cross;
    }
    __syncthreads();
    // S = exp(cum_last) S + Σ_u exp(cum_last − cum_u) k_uᵀ v_u.
    const float keep = expf(cum[n - 1]);
    for (int i = threadIdx.x; i < d * d; i += blockDim.x) {
      const int r = i / d, c = i % d;
      float add = 0.0f;
      for (int u = 0; u < n; ++u) add += tail[u] * ks[u * ld + r] * vs[u * ld + c];
      S[i] = keep * S[i] + add;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < d * d; i += blockDim.x) state[i] = S[i];
}

// Thread c owns column c of the state: no reductions, and the state is read and written once.
__global__ void StepKernel(RetentionShape shape, const RetentionTask* tasks, const float* q,
                           const float* k, const float* v, const float* log_decay, float* out) {
  extern __shared__ float qk[];  // [2, d]
  const RetentionTask task = tasks[blockIdx.x];
  const int h = blockIdx.y;
  const int d = shape.head_dim;
  const int64_t base = task.row_begin * shape.ld + int64_t{h} * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    qk[i] = q[base + i];
    qk[d + i] = k[base + i];
  }
  __syncthreads();
  const float gamma = expf(log_decay[task.row_begin * shape.heads + h]);
  float* state = task.state + int64_t{h} * d * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const float vc = v[base + c];
    float o = 0.0f;
    for (int r = 0; r < d; ++r) {
      const float s = gamma * state[r * d + c] + qk[d + r] * vc;
      state[r * d + c] = s;
      o += qk[r] * s;
    }
    out[base + c] = o;
  }
}

}  // namespace

bool RetentionChunkwiseFits(int head_dim) {
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
      cudaSuccess) {
    return false;
  }
  return ChunkLayout{head_dim, head_dim + 1}.floats() * 4 <= limit;
}

cudaError_t GatedRetentionChunkwise(const RetentionShape& shape, const RetentionTask* tasks,
                                    int count, const float* q, const float* k, const float* v,
                                    const float* log_decay, float* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const size_t bytes = ChunkLayout{shape.head_dim, shape.head_dim + 1}.floats() * sizeof(float);
  if (cudaError_t e = cudaFuncSetAttribute(
          ChunkwiseKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(shape.heads));
  ChunkwiseKernel<<<grid, kThreads, bytes, stream>>>(shape, tasks, q, k, v, log_decay, out);
  return cudaGetLastError();
}

cudaError_t GatedRetentionStep(const RetentionShape& shape, const RetentionTask* tasks, int count,
                               const float* q, const float* k, const float* v,
                               const float* log_decay, float* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(shape.heads));
  const int threads = shape.head_dim < 1024 ? ((shape.head_dim + 31) / 32) * 32 : 1024;
  StepKernel<<<grid, threads, 2 * shape.head_dim * sizeof(float), stream>>>(shape, tasks, q, k, v,
                                                                            log_decay, out);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
