// Softmax attention on the GPU for one query row over a run of keys, many rows per launch:
// the cross decoder's decode and last-position queries over a sequence's shared K/V, and the
// SWA self-decoder's windowed queries over its ring buffer plus the segment's new rows. Keys
// are split into ranges attended by separate blocks (flash-decoding), so one long sequence
// still fills the GPU; each block serves every query head of one KV head (GQA), so each K/V
// row is read once per range.
#ifndef YOCO_KERNELS_CUDA_ATTENTION_H_
#define YOCO_KERNELS_CUDA_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace yoco::cuda {

struct AttentionShape {
  int q_heads = 0;
  int kv_heads = 0;  // query head h reads KV head h / (q_heads / kv_heads)
  int head_dim = 0;
  int64_t q_ld = 0;   // row stride of q and out
  int64_t kv_ld = 0;  // row stride of every key and value row
};

// One query row and where its keys live. The query attends the n keys at positions
// [first, first + n). A key at position p < split is row p of `old_keys` (row p % ring when
// ring > 0); a key at p >= split is row p − split of `new_keys`. Values alike.
struct AttentionQuery {
  int64_t row = 0;  // row of q and out
  int64_t first = 0;
  int64_t n = 0;  // >= 1
  const float* old_keys = nullptr;
  const float* old_values = nullptr;
  int64_t ring = 0;
  int64_t split = 0;
  const float* new_keys = nullptr;
  const float* new_values = nullptr;
};

// Largest q_heads/kv_heads × head_dim one block can accumulate.
constexpr int kMaxGroupWidth = 2048;

// Partial results of (query, key range, head): max, sum, then head_dim unnormalised outputs.
// Floats of scratch Attention needs for `count` queries over at most max_keys keys each.
int64_t AttentionScratchFloats(const AttentionShape& shape, int64_t count, int64_t max_keys,
                               int sm_count);

// out[row, h·d ...] = softmax(scale · q·Kᵀ) V for each query (device array) and head, with
// scale = 1/√head_dim. max_keys bounds every query's n. K/V rows are copied 16 bytes at a time:
// head_dim and kv_ld must be multiples of 4 and the key/value pointers 16-byte aligned
// (cudaErrorInvalidValue otherwise).
cudaError_t Attention(const AttentionShape& shape, const AttentionQuery* queries, int64_t count,
                      int64_t max_keys, const float* q, float* out, float* scratch, int sm_count,
                      cudaStream_t stream);

}  // namespace yoco::cuda

#endif  // YOCO_KERNELS_CUDA_ATTENTION_H_
