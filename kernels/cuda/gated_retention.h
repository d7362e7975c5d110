// Gated retention on the GPU: the chunkwise form for prefill segments and the recurrent step
// for decode rows, the CPU kernels' twins (fp32, same state layout S[k index][v index]).
#ifndef YOCO_KERNELS_CUDA_GATED_RETENTION_H_
#define YOCO_KERNELS_CUDA_GATED_RETENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace yoco::cuda {

// One segment of one sequence: rows [row_begin, row_begin + rows) of the stacked q/k/v/out, and
// the sequence's state of this layer, [heads, d, d].
struct RetentionTask {
  int64_t row_begin = 0;
  int64_t rows = 0;
  float* state = nullptr;
  // Chunkwise only: index of the task's first chunk among all chunks of the call (tasks' chunks
  // are numbered in task order; see RetentionChunks).
  int64_t first_chunk = 0;
};

// One chunk of a chunkwise task: rows [chunk · kRetentionChunk, ...) of task `task`.
struct RetentionChunk {
  int32_t task = 0;
  int32_t chunk = 0;
};

// Shapes shared by every task of a call. q/k/v/out rows hold `heads` head vectors of d (row
// stride ld); log_decay rows hold one log γ per head (row stride heads).
struct RetentionShape {
  int heads = 0;
  int head_dim = 0;
  int64_t ld = 0;
};

// Tokens per chunk of the chunkwise kernels (the CPU's is 256; the GPU keeps a chunk's q/k/v and
// scores in shared memory beside a state, so it uses smaller chunks).
constexpr int kRetentionChunk = 64;

inline int64_t RetentionChunkCount(int64_t rows) {
  return (rows + kRetentionChunk - 1) / kRetentionChunk;
}

// True when the chunkwise kernels can run with this head dimension on the current device
// (a state plus one chunk must fit in a block's shared memory).
bool RetentionChunkwiseFits(int head_dim);

// Floats of scratch the chunkwise form needs for `chunks` chunks in all.
inline int64_t RetentionScratchFloats(const RetentionShape& shape, int64_t chunks) {
  return chunks * shape.heads * (int64_t{shape.head_dim} * shape.head_dim + 1);
}

// Chunkwise form for `count` tasks (device array), any number of rows each, in three launches
// that each fill the GPU however few sequences there are: every chunk's own state contribution
// (in parallel), the scan of states across each task's chunks, then every chunk's outputs (in
// parallel). `chunks` (device array, `chunk_count` long) lists every task's chunks in task
// order, matching the tasks' first_chunk.
cudaError_t GatedRetentionChunkwise(const RetentionShape& shape, const RetentionTask* tasks,
                                    int count, const RetentionChunk* chunks, int64_t chunk_count,
                                    const float* q, const float* k, const float* v,
                                    const float* log_decay, float* out, float* scratch,
                                    cudaStream_t stream);

// Recurrent step for `count` tasks of one row each: S = γ S + kᵀv, o = q S.
cudaError_t GatedRetentionStep(const RetentionShape& shape, const RetentionTask* tasks, int count,
                               const float* q, const float* k, const float* v,
                               const float* log_decay, float* out, cudaStream_t stream);

}  // namespace yoco::cuda

#endif  // YOCO_KERNELS_CUDA_GATED_RETENTION_H_
