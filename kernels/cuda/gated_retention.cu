// Gated retention kernels. Chunkwise: with cum_j the inclusive cumulative log-decay inside a
// chunk, a chunk's outputs are o_j = Σ_{u≤j} (q_j·k_u) exp(cum_j − cum_u) v_u + exp(cum_j) q_j S_in
// and the state leaving it is S_out = exp(cum_last) S_in + U with U = Σ_u exp(cum_last − cum_u)
// k_uᵀ v_u. U and the decay of every chunk are independent, so they are computed for all
// chunks at once (ContributionKernel); a scan over each task's chunks then turns them into the
// state entering each chunk (ScanKernel), after which every chunk's outputs are independent
// again (OutputKernel). Products run as 4×4 register tiles over shared memory; rows of a short
// last chunk are zero-filled so tiles never read garbage. Shared rows are padded by one float
// against bank conflicts.
#include <algorithm>

#include "kernels/cuda/gated_retention.h"

namespace yoco::cuda {
namespace {

constexpr int kThreads = 256;
// The per-chunk kernels hold one or two blocks per multiprocessor (their shared memory), so
// they run wide blocks to keep enough warps in flight.
constexpr int kChunkThreads = 512;
constexpr int kC = kRetentionChunk;
constexpr int kTile = 4;

// acc[i][j] += a[i · a_stride] · b[j · b_stride]: one step of a kTile×kTile register tile.
__device__ __forceinline__ void OuterProductAdd(const float* a, int a_stride, const float* b,
                                                int b_stride, float (&acc)[kTile][kTile]) {
  float x[kTile], y[kTile];
#pragma unroll
  for (int i = 0; i < kTile; ++i) {
    x[i] = a[i * a_stride];
    y[i] = b[i * b_stride];
  }
#pragma unroll
  for (int i = 0; i < kTile; ++i)
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc[i][j] += x[i] * y[j];
}

// Loads the chunk's rows of x (head h) into xs [kC, ld], zero past n.
__device__ void LoadChunk(const float* x, int64_t row0, int n, int64_t ld_global, int h, int d,
                          float* xs, int ld) {
  for (int i = threadIdx.x; i < kC * d; i += blockDim.x) {
    const int r = i / d, c = i % d;
    xs[r * ld + c] = r < n ? x[(row0 + r) * ld_global + int64_t{h} * d + c] : 0.0f;
  }
}

// cum[j] for j < n (0 beyond) by thread 0; returns nothing, caller syncs.
__device__ void CumulativeDecay(const float* log_decay, int64_t row0, int n, int heads, int h,
                                float* cum) {
  if (threadIdx.x == 0) {
    float acc = 0.0f;
    for (int j = 0; j < kC; ++j) {
      if (j < n) acc += log_decay[(row0 + j) * heads + h];
      cum[j] = acc;
    }
  }
}

// Block (chunk, head): U = Σ_u exp(cum_last − cum_u) k_uᵀ v_u into scratch, and exp(cum_last).
__global__ void __launch_bounds__(kChunkThreads)
    ContributionKernel(RetentionShape shape, const RetentionTask* tasks,
                       const RetentionChunk* chunks, const float* k, const float* v,
                       const float* log_decay, float* scratch, int64_t chunk_count) {
  extern __shared__ float smem[];
  const RetentionChunk ref = chunks[blockIdx.x];
  const RetentionTask task = tasks[ref.task];
  const int h = blockIdx.y;
  const int d = shape.head_dim, ld = d + 1;
  const int64_t row0 = task.row_begin + int64_t{ref.chunk} * kC;
  const int n = static_cast<int>(min(int64_t{kC}, task.row_begin + task.rows - row0));
  float* ks = smem;           // [kC, ld], scaled by exp(cum_last − cum_u)
  float* vs = ks + kC * ld;   // [kC, ld]
  float* cum = vs + kC * ld;  // [kC]
  LoadChunk(k, row0, n, shape.ld, h, d, ks, ld);
  LoadChunk(v, row0, n, shape.ld, h, d, vs, ld);
  CumulativeDecay(log_decay, row0, n, shape.heads, h, cum);
  __syncthreads();
  const float last = cum[n - 1];
  for (int i = threadIdx.x; i < n * d; i += blockDim.x) {
    const int u = i / d, c = i % d;
    ks[u * ld + c] *= expf(last - cum[u]);
  }
  __syncthreads();
  const int64_t slot = int64_t{blockIdx.x} * shape.heads + h;
  float* U = scratch + slot * d * d;
  const int tiles = (d / kTile) * (d / kTile);
  for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
    const int r0 = (t / (d / kTile)) * kTile, c0 = (t % (d / kTile)) * kTile;
    float acc[kTile][kTile] = {};
    for (int u = 0; u < n; ++u) {
      OuterProductAdd(ks + u * ld + r0, 1, vs + u * ld + c0, 1, acc);
    }
#pragma unroll
    for (int i = 0; i < kTile; ++i)
#pragma unroll
      for (int j = 0; j < kTile; ++j) U[(r0 + i) * d + c0 + j] = acc[i][j];
  }
  if (threadIdx.x == 0) scratch[chunk_count * shape.heads * d * d + slot] = expf(last);
}

// Block (task, head, element block): walks the task's chunks in order, replacing each chunk's
// U by the state entering it and carrying S = exp(cum_last) S + U; the task's state ends as the
// state after its last chunk.
__global__ void ScanKernel(RetentionShape shape, const RetentionTask* tasks, float* scratch,
                           int64_t chunk_count) {
  const RetentionTask task = tasks[blockIdx.x];
  const int h = blockIdx.y;
  const int d = shape.head_dim;
  const int e = blockIdx.z * blockDim.x + threadIdx.x;
  if (e >= d * d) return;
  float* state = task.state + int64_t{h} * d * d + e;
  const float* gammas = scratch + chunk_count * shape.heads * d * d;
  float s = *state;
  const int64_t n = (task.rows + kC - 1) / kC;
  for (int64_t c = 0; c < n; ++c) {
    const int64_t slot = (task.first_chunk + c) * shape.heads + h;
    float* u = scratch + slot * d * d + e;
    const float contribution = *u;
    *u = s;
    s = gammas[slot] * s + contribution;
  }
  *state = s;
}

// Block (chunk, head): o_j = Σ_{u≤j} (q_j·k_u) exp(cum_j − cum_u) v_u + exp(cum_j) q_j S_in.
__global__ void __launch_bounds__(kChunkThreads)
    OutputKernel(RetentionShape shape, const RetentionTask* tasks, const RetentionChunk* chunks,
                 const float* q, const float* k, const float* v, const float* log_decay,
                 const float* scratch, float* out) {
  extern __shared__ float smem[];
  const RetentionChunk ref = chunks[blockIdx.x];
  const RetentionTask task = tasks[ref.task];
  const int h = blockIdx.y;
  const int d = shape.head_dim, ld = d + 1;
  const int64_t row0 = task.row_begin + int64_t{ref.chunk} * kC;
  const int n = static_cast<int>(min(int64_t{kC}, task.row_begin + task.rows - row0));
  float* S = smem;                      // [d, d]
  float* qs = S + d * d;                // [kC, ld]
  float* ks = qs + kC * ld;             // [kC, ld]
  float* vs = ks + kC * ld;             // [kC, ld]
  float* scores = vs + kC * ld;         // [kC, kC + 1]
  float* cum = scores + kC * (kC + 1);  // [kC]
  const int lds = kC + 1;
  const float* s_in = scratch + (int64_t{blockIdx.x} * shape.heads + h) * d * d;
  for (int i = threadIdx.x; i < d * d; i += blockDim.x) S[i] = s_in[i];
  LoadChunk(q, row0, n, shape.ld, h, d, qs, ld);
  LoadChunk(k, row0, n, shape.ld, h, d, ks, ld);
  LoadChunk(v, row0, n, shape.ld, h, d, vs, ld);
  CumulativeDecay(log_decay, row0, n, shape.heads, h, cum);
  __syncthreads();
  // scores[j, u] = (q_j·k_u) exp(cum_j − cum_u) for u ≤ j, else 0.
  constexpr int kScoreTiles = (kC / kTile) * (kC / kTile);
  for (int t = threadIdx.x; t < kScoreTiles; t += blockDim.x) {
    const int j0 = (t / (kC / kTile)) * kTile, u0 = (t % (kC / kTile)) * kTile;
    float acc[kTile][kTile] = {};
    if (u0 <= j0 + kTile - 1) {
      for (int c = 0; c < d; ++c) {
        OuterProductAdd(qs + j0 * ld + c, ld, ks + u0 * ld + c, ld, acc);
      }
    }
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
#pragma unroll
      for (int j = 0; j < kTile; ++j) {
        const int jj = j0 + i, uu = u0 + j;
        scores[jj * lds + uu] = uu <= jj ? acc[i][j] * expf(cum[jj] - cum[uu]) : 0.0f;
      }
    }
  }
  __syncthreads();
  const int tiles = (kC / kTile) * (d / kTile);
  for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
    const int j0 = (t / (d / kTile)) * kTile, c0 = (t % (d / kTile)) * kTile;
    if (j0 >= n) continue;
    float intra[kTile][kTile] = {}, cross[kTile][kTile] = {};
    for (int u = 0; u < j0 + kTile && u < n; ++u) {
      OuterProductAdd(scores + j0 * lds + u, lds, vs + u * ld + c0, 1, intra);
    }
    for (int r = 0; r < d; ++r) {
      OuterProductAdd(qs + j0 * ld + r, ld, S + r * d + c0, 1, cross);
    }
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      const int j = j0 + i;
      if (j >= n) break;
      const float f = expf(cum[j]);
      float* o = out + (row0 + j) * shape.ld + int64_t{h} * d + c0;
#pragma unroll
      for (int c = 0; c < kTile; ++c) o[c] = intra[i][c] + f * cross[i][c];
    }
  }
}

size_t ContributionBytes(int d) { return sizeof(float) * (2 * kC * (d + 1) + kC); }
size_t OutputBytes(int d) {
  return sizeof(float) * (int64_t{d} * d + 3 * kC * (d + 1) + kC * (kC + 1) + kC);
}

// Thread (c, part) owns column c of the state's rows part, part + parts, ...: each state
// element is read and written once, by enough threads to keep many loads in flight; the output
// column is summed over the parts in shared memory.
__global__ void StepKernel(RetentionShape shape, const RetentionTask* tasks, const float* q,
                           const float* k, const float* v, const float* log_decay, float* out) {
  extern __shared__ float smem[];
  const int d = shape.head_dim;
  const int parts = blockDim.y;
  float* qs = smem;         // [d]
  float* ks = qs + d;       // [d]
  float* partial = ks + d;  // [parts, d]
  const RetentionTask task = tasks[blockIdx.x];
  const int h = blockIdx.y;
  const int64_t base = task.row_begin * shape.ld + int64_t{h} * d;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int i = tid; i < d; i += blockDim.x * parts) {
    qs[i] = q[base + i];
    ks[i] = k[base + i];
  }
  __syncthreads();
  const float gamma = expf(log_decay[task.row_begin * shape.heads + h]);
  float* state = task.state + int64_t{h} * d * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const float vc = v[base + c];
    float o = 0.0f;
#pragma unroll 4
    for (int r = threadIdx.y; r < d; r += parts) {
      const float s = gamma * state[r * d + c] + ks[r] * vc;
      state[r * d + c] = s;
      o += qs[r] * s;
    }
    partial[threadIdx.y * d + c] = o;
  }
  __syncthreads();
  for (int c = tid; c < d; c += blockDim.x * parts) {
    float o = 0.0f;
    for (int p = 0; p < parts; ++p) o += partial[p * d + c];
    out[base + c] = o;
  }
}

}  // namespace

bool RetentionChunkwiseFits(int head_dim) {
  int device = 0, limit = 0;
  if (head_dim % kTile != 0) return false;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
      cudaSuccess) {
    return false;
  }
  return OutputBytes(head_dim) <= static_cast<size_t>(limit);
}

cudaError_t GatedRetentionChunkwise(const RetentionShape& shape, const RetentionTask* tasks,
                                    int count, const RetentionChunk* chunks, int64_t chunk_count,
                                    const float* q, const float* k, const float* v,
                                    const float* log_decay, float* out, float* scratch,
                                    cudaStream_t stream) {
  if (count == 0 || chunk_count == 0) return cudaSuccess;
  const int d = shape.head_dim;
  if (d % kTile != 0 || chunk_count > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const size_t contribution_bytes = ContributionBytes(d), output_bytes = OutputBytes(d);
  if (cudaError_t e =
          cudaFuncSetAttribute(ContributionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(contribution_bytes));
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t e =
          cudaFuncSetAttribute(OutputKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(output_bytes));
      e != cudaSuccess) {
    return e;
  }
  const dim3 per_chunk(static_cast<unsigned>(chunk_count), static_cast<unsigned>(shape.heads));
  ContributionKernel<<<per_chunk, kChunkThreads, contribution_bytes, stream>>>(
      shape, tasks, chunks, k, v, log_decay, scratch, chunk_count);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 scan(static_cast<unsigned>(count), static_cast<unsigned>(shape.heads),
                  static_cast<unsigned>((d * d + kThreads - 1) / kThreads));
  ScanKernel<<<scan, kThreads, 0, stream>>>(shape, tasks, scratch, chunk_count);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  OutputKernel<<<per_chunk, kChunkThreads, output_bytes, stream>>>(shape, tasks, chunks, q, k, v,
                                                                   log_decay, scratch, out);
  return cudaGetLastError();
}

cudaError_t GatedRetentionStep(const RetentionShape& shape, const RetentionTask* tasks, int count,
                               const float* q, const float* k, const float* v,
                               const float* log_decay, float* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(shape.heads));
  const int columns = shape.head_dim < 1024 ? (shape.head_dim + 31) / 32 * 32 : 1024;
  const int parts = std::max(1, std::min(8, 1024 / columns));
  const size_t smem = (2 + parts) * shape.head_dim * sizeof(float);
  StepKernel<<<grid, dim3(columns, parts), smem, stream>>>(shape, tasks, q, k, v, log_decay, out);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
