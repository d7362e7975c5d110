// Split-K attention: block (range, kv head, query) copies tiles of 32 K/V rows into shared
// memory asynchronously, two tiles deep, scores them for every query head of the group, keeps a
// running max and sum per head (the online softmax) and accumulates the unnormalised output; a
// second kernel merges the ranges of each (query, head). Scores are scaled before the max, as the
// CPU kernels do.
#include <cuda_pipeline.h>

#include <atomic>
#include <cmath>

#include "kernels/cuda/attention.h"

namespace yoco::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 32;  // keys per tile: one per lane in the softmax update
constexpr int kStages = 2;
constexpr int kAccPerThread = kMaxGroupWidth / kThreads;
constexpr int64_t kMinKeysPerRange = 256;
// Bound on the partial buffer; beyond it ranges get longer instead of more numerous.
constexpr int64_t kMaxPartialFloats = int64_t{64} << 20;
// Queries per launch (the grid's z extent is at most 65535).
constexpr int64_t kMaxQueriesPerLaunch = 32768;

struct Ranges {
  int64_t keys_per_range;
  int64_t count;
};

Ranges PlanRanges(const AttentionShape& shape, int64_t queries, int64_t max_keys, int sm_count) {
  const int64_t blocks_wanted = 8LL * (sm_count > 0 ? sm_count : 1);
  const int64_t base = queries * shape.kv_heads;
  int64_t ranges = (blocks_wanted + base - 1) / base;
  const int64_t per_range_floats = queries * shape.q_heads * (shape.head_dim + 2LL);
  const int64_t cap = kMaxPartialFloats / per_range_floats;
  if (ranges > cap) ranges = cap;
  if (ranges < 1) ranges = 1;
  // Callers round max_keys up to a power of two (stable grids for CUDA graphs), so the real
  // longest query may be half of it: size ranges for that half, to keep the blocks busy.
  const int64_t half = (max_keys + 1) / 2;
  int64_t keys = (half + ranges - 1) / ranges;
  if (keys < kMinKeysPerRange) keys = kMinKeysPerRange;
  keys = (keys + kTile - 1) / kTile * kTile;
  return {keys, (max_keys + keys - 1) / keys};
}

// Copies tile rows [t0, t0 + tk) of the query's keys and values for KV head kvh into one stage
// of shared memory with cp.async (16 bytes per copy), and commits them as one group.
__device__ void IssueTile(const AttentionShape& shape, const AttentionQuery& qd, int kvh,
                          int64_t t0, int tk, float* ks, float* vs, int ldk) {
  const int d = shape.head_dim;
  const int per_row = d / 4;
  for (int i = threadIdx.x; i < tk * per_row; i += blockDim.x) {
    const int r = i / per_row, c = (i % per_row) * 4;
    const int64_t pos = qd.first + t0 + r;
    const float* krow;
    const float* vrow;
    if (pos >= qd.split) {
      krow = qd.new_keys + (pos - qd.split) * shape.kv_ld;
      vrow = qd.new_values + (pos - qd.split) * shape.kv_ld;
    } else {
      const int64_t slot = qd.ring > 0 ? pos % qd.ring : pos;
      krow = qd.old_keys + slot * shape.kv_ld;
      vrow = qd.old_values + slot * shape.kv_ld;
    }
    __pipeline_memcpy_async(ks + r * ldk + c, krow + int64_t{kvh} * d + c, 16);
    __pipeline_memcpy_async(vs + r * ldk + c, vrow + int64_t{kvh} * d + c, 16);
  }
  __pipeline_commit();
}

// Two shared-memory stages: the copies of tile i + 1 fly while tile i is scored and summed.
__global__ void RangeKernel(AttentionShape shape, const AttentionQuery* queries, const float* q,
                            int64_t keys_per_range, float* partial) {
  extern __shared__ __align__(16) float smem[];
  const AttentionQuery qd = queries[blockIdx.z];
  const int kvh = blockIdx.y;
  const int64_t range = blockIdx.x;
  const int d = shape.head_dim;
  const int group = shape.q_heads / shape.kv_heads;
  const int width = group * d;
  const int ldk = d + 4;           // 16-byte rows; float4 reads of 8 rows hit distinct banks
  float* qs = smem;                // [group, d]
  float* stage_base = qs + width;  // kStages × (K [kTile, ldk], V [kTile, ldk])
  float* p = stage_base + kStages * 2 * kTile * ldk;  // [group, kTile]
  float* m = p + group * kTile;                       // [group] running max
  float* l = m + group;                               // [group] running sum
  float* corr = l + group;  // [group] this tile's rescale of the old accumulators

  const int64_t begin = range * keys_per_range;
  const int64_t end = begin + keys_per_range < qd.n ? begin + keys_per_range : qd.n;
  // Partial layout: [query][range][q head] of (max, sum, d outputs).
  const int64_t ranges = gridDim.x;
  float* out =
      partial +
      ((int64_t{blockIdx.z} * ranges + range) * shape.q_heads + int64_t{kvh} * group) * (d + 2);
  if (begin >= end) {
    for (int i = threadIdx.x; i < group * (d + 2); i += blockDim.x) {
      const int c = i % (d + 2);
      out[i] = c == 0 ? -INFINITY : 0.0f;
    }
    return;
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  auto tile_size = [&](int64_t t0) {
    return static_cast<int>(end - t0 < kTile ? end - t0 : kTile);
  };
  IssueTile(shape, qd, kvh, begin, tile_size(begin), stage_base, stage_base + kTile * ldk, ldk);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    qs[i] = q[qd.row * shape.q_ld + int64_t{kvh} * width + i];
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  float acc[kAccPerThread];
#pragma unroll
  for (int a = 0; a < kAccPerThread; ++a) acc[a] = 0.0f;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  int stage = 0;
  for (int64_t t0 = begin; t0 < end; t0 += kTile, stage ^= 1) {
    const int tk = tile_size(t0);
    float* ks = stage_base + stage * 2 * kTile * ldk;
    float* vs = ks + kTile * ldk;
    if (t0 + kTile < end) {
      float* next = stage_base + (stage ^ 1) * 2 * kTile * ldk;
      IssueTile(shape, qd, kvh, t0 + kTile, tile_size(t0 + kTile), next, next + kTile * ldk, ldk);
    } else {
      __pipeline_commit();  // an empty group keeps "all but the newest" meaning this tile
    }
    __pipeline_wait_prior(1);
    __syncthreads();
    for (int i = threadIdx.x; i < group * kTile; i += blockDim.x) {
      const int g = i / kTile, r = i % kTile;
      float s = -INFINITY;
      if (r < tk) {
        const float4* qg = reinterpret_cast<const float4*>(qs + g * d);
        const float4* kr = reinterpret_cast<const float4*>(ks + r * ldk);
        float dot = 0.0f;
        for (int c = 0; c < d / 4; ++c) {
          const float4 a = qg[c], b = kr[c];
          dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
        s = dot * scale;
      }
      p[g * kTile + r] = s;
    }
    __syncthreads();
    for (int g = warp; g < group; g += kThreads / 32) {
      const float s = p[g * kTile + lane];
      float mx = s;
      for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_new = fmaxf(m[g], mx);
      const float e = lane < tk ? expf(s - m_new) : 0.0f;
      p[g * kTile + lane] = e;
      float sum = e;
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      __syncwarp();
      if (lane == 0) {
        const float c = expf(m[g] - m_new);  // 0 on the first tile (m = −inf)
        corr[g] = c;
        l[g] = l[g] * c + sum;
        m[g] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int a = 0; a < kAccPerThread; ++a) {
      const int e = threadIdx.x + a * kThreads;
      if (e < width) {
        const int g = e / d, c = e % d;
        float sum = acc[a] * corr[g];
        const float* pg = p + g * kTile;
        for (int r = 0; r < tk; ++r) sum += pg[r] * vs[r * ldk + c];
        acc[a] = sum;
      }
    }
    __syncthreads();  // this stage is refilled two tiles on
  }
#pragma unroll
  for (int a = 0; a < kAccPerThread; ++a) {
    const int e = threadIdx.x + a * kThreads;
    if (e < width) {
      const int g = e / d, c = e % d;
      out[g * (d + 2) + 2 + c] = acc[a];
    }
  }
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    out[g * (d + 2)] = m[g];
    out[g * (d + 2) + 1] = l[g];
  }
}

// Block (query, head): thread c merges output column c over the ranges.
__global__ void MergeKernel(AttentionShape shape, const AttentionQuery* queries, int64_t ranges,
                            const float* partial, float* out) {
  const int64_t query = blockIdx.x;
  const int h = blockIdx.y;
  const int d = shape.head_dim;
  const float* base = partial + (query * ranges * shape.q_heads + h) * (d + 2);
  const int64_t stride = int64_t{shape.q_heads} * (d + 2);
  float mx = -INFINITY;
  for (int64_t r = 0; r < ranges; ++r) mx = fmaxf(mx, base[r * stride]);
  float denom = 0.0f;
  for (int64_t r = 0; r < ranges; ++r) {
    const float mr = base[r * stride];
    if (mr != -INFINITY) denom += base[r * stride + 1] * expf(mr - mx);
  }
  float* o = out + queries[query].row * shape.q_ld + int64_t{h} * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float num = 0.0f;
    for (int64_t r = 0; r < ranges; ++r) {
      const float mr = base[r * stride];
      if (mr != -INFINITY) num += base[r * stride + 2 + c] * expf(mr - mx);
    }
    o[c] = num / denom;
  }
}

}  // namespace

int64_t AttentionScratchFloats(const AttentionShape& shape, int64_t count, int64_t max_keys,
                               int sm_count) {
  const int64_t batch = count < kMaxQueriesPerLaunch ? count : kMaxQueriesPerLaunch;
  const Ranges r = PlanRanges(shape, batch, max_keys, sm_count);
  return batch * r.count * shape.q_heads * (shape.head_dim + 2LL);
}

cudaError_t Attention(const AttentionShape& shape, const AttentionQuery* queries, int64_t count,
                      int64_t max_keys, const float* q, float* out, float* scratch, int sm_count,
                      cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int group = shape.q_heads / shape.kv_heads;
  if (group * shape.head_dim > kMaxGroupWidth || shape.head_dim % 4 != 0 || shape.kv_ld % 4 != 0) {
    return cudaErrorInvalidValue;
  }
  if (count > kMaxQueriesPerLaunch) {
    for (int64_t q0 = 0; q0 < count; q0 += kMaxQueriesPerLaunch) {
      const int64_t n = count - q0 < kMaxQueriesPerLaunch ? count - q0 : kMaxQueriesPerLaunch;
      if (cudaError_t e =
              Attention(shape, queries + q0, n, max_keys, q, out, scratch, sm_count, stream);
          e != cudaSuccess) {
        return e;
      }
    }
    return cudaSuccess;
  }
  const Ranges r = PlanRanges(shape, count, max_keys, sm_count);
  const int d = shape.head_dim;
  const size_t smem =
      sizeof(float) * (group * d + kStages * 2 * kTile * (d + 4) + group * kTile + 3 * group);
  // Raised once per size, outside any graph capture that later replays the launch.
  static std::atomic<size_t> configured{48 * 1024};
  if (smem > configured.load()) {
    if (cudaError_t e = cudaFuncSetAttribute(
            RangeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        e != cudaSuccess) {
      return e;
    }
    configured.store(smem);
  }
  const dim3 grid(static_cast<unsigned>(r.count), static_cast<unsigned>(shape.kv_heads),
                  static_cast<unsigned>(count));
  RangeKernel<<<grid, kThreads, smem, stream>>>(shape, queries, q, r.keys_per_range, scratch);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 merge_grid(static_cast<unsigned>(count), static_cast<unsigned>(shape.q_heads));
  const int merge_threads = d < 1024 ? (d + 31) / 32 * 32 : 1024;
  MergeKernel<<<merge_grid, merge_threads, 0, stream>>>(shape, queries, r.count, scratch, out);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
