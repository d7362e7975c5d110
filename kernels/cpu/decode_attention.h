// Decode attention: one new query token per sequence, all its heads, over the sequence's
// cached K/V rows (GQA, scale 1/√d). Work is split into (sequence, key range) tasks whose
// partial softmax results are merged, so a single sequence still uses every thread and each
// task streams whole K/V rows from memory once.
#ifndef YOCO_KERNELS_CPU_DECODE_ATTENTION_H_
#define YOCO_KERNELS_CPU_DECODE_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"

namespace yoco::cpu {

struct DecodeQuery {
  const float* q = nullptr;       // [q_heads, d]
  const float* keys = nullptr;    // [n, kv_heads * d]
  const float* values = nullptr;  // [n, kv_heads * d]
  int64_t n = 0;                  // keys to attend (>= 1)
  float* out = nullptr;           // [q_heads, d]
  // When set, the K (V) rows are read from these bf16 rows (same layout) instead.
  const uint16_t* keys_bf16 = nullptr;
  const uint16_t* values_bf16 = nullptr;
};

// Buffers reused across calls (no allocation once they have grown).
struct DecodeAttentionScratch {
  struct Task {
    int64_t query;
    int64_t begin, end;  // key range
  };
  std::vector<Task> tasks;
  std::vector<int64_t> first_task;  // [queries + 1]
  std::vector<float> partial;       // per task: [q_heads][max, sum], then [q_heads, d]
  std::vector<float> scores;        // per thread: q_heads × key range
};

void DecodeAttention(const GqaShape& shape, const DecodeQuery* queries, int64_t count,
                     DecodeAttentionScratch* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_DECODE_ATTENTION_H_
