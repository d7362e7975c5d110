// Decode attention: one new query token per sequence, all its heads, over the sequence's
// cached K/V rows (GQA, scale 1/√d). A sequence's keys are split into ranges of a fixed length
// whose partial softmax results are merged in order, so its output does not depend on the batch
// it is in; the ranges are grouped into tasks (whole sequences for a large batch, a few ranges
// each for a small one) so that a single sequence still uses every thread. Ranges of several
// queries over the same K/V blocks (questions on one document, whose chunks they share) are one
// task that reads each block once for all of them, every query's arithmetic unchanged.
#ifndef YOCO_KERNELS_CPU_DECODE_ATTENTION_H_
#define YOCO_KERNELS_CPU_DECODE_ATTENTION_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cache_line_allocator.h"

namespace yoco::cpu {

// Keys "in lanes": rows in blocks of kKeyLaneRows, each block [width][kKeyLaneRows] (value c of
// row r at KeyLaneIndex(r, c, width)), the last block zero-padded. A block's scores for one
// query head are then kKeyLaneRows dot products side by side in SIMD lanes, read in address
// order with no horizontal sums: the cross decoder's K pass runs near the read bandwidth, where
// row-major keys left it at a third of it.
inline constexpr int64_t kKeyLaneRows = 16;
inline int64_t KeyLaneIndex(int64_t row, int64_t col, int64_t width) {
  return (row / kKeyLaneRows) * kKeyLaneRows * width + col * kKeyLaneRows + row % kKeyLaneRows;
}

// Values "in strips": rows in blocks of kValueStripRows, each block cut by columns into strips
// of kValueStripWidth (the last one narrower when the width is not a multiple), each strip
// [kValueStripRows][its width]. The V pass reads one KV head's columns of a block of rows at a
// time; in strips those bytes are contiguous and the whole pass is one address-ordered stream,
// where row-major values make it jump a row's length between the head's lines.
inline constexpr int64_t kValueStripRows = 32;
inline constexpr int64_t kValueStripWidth = 64;
inline int64_t ValueStripIndex(int64_t row, int64_t col, int64_t width) {
  const int64_t strip = col / kValueStripWidth * kValueStripWidth;  // the strip's first column
  const int64_t strip_width = std::min(kValueStripWidth, width - strip);
  return (row / kValueStripRows) * kValueStripRows * width + strip * kValueStripRows +
         (row % kValueStripRows) * strip_width + (col - strip);
}

struct DecodeQuery {
  const float* q = nullptr;       // [q_heads, d]
  const float* keys = nullptr;    // [n, kv_heads * d], or in lanes (keys_in_lanes)
  const float* values = nullptr;  // [n, kv_heads * d]
  int64_t n = 0;                  // keys to attend (>= 1)
  float* out = nullptr;           // [q_heads, d]
  // When set, the K (V) rows are read from these bf16 rows (same layout) instead.
  const uint16_t* keys_bf16 = nullptr;
  const uint16_t* values_bf16 = nullptr;
  bool keys_in_lanes = false;     // keys (or keys_bf16) are in lanes, see kKeyLaneRows
  bool values_in_strips = false;  // values (or values_bf16) are in strips, see kValueStripRows
  // Paged K/V, in place of the pointers above: rows [b·block_rows, (b+1)·block_rows) of K (V)
  // are stored from key_blocks[b] (value_blocks[b]) as if they were rows 0.. of their own, in
  // the layouts above, bf16 when blocks_bf16. block_rows is a whole number of both layouts'
  // blocks. Every value is read in the same order as from one array: the same bits, however the
  // rows are spread (blocks shared between sequences decode as if each had its own copy).
  const void* const* key_blocks = nullptr;
  const void* const* value_blocks = nullptr;
  int64_t block_rows = 0;
  bool blocks_bf16 = false;
};

// Buffers reused across calls (no allocation once they have grown).
struct DecodeAttentionScratch {
  struct Task {
    int64_t query;
    int64_t first_range, end_range;  // consecutive ranges of the query's keys
  };
  std::vector<Task> tasks;
  std::vector<int64_t> first_range;  // [queries + 1]: query s's ranges are numbered from here
  std::vector<int64_t> range_query;  // [ranges]: the query a range is of
  // Ranges of several queries over the same K/V blocks (shared chunks), read once for all:
  // group_of[range] (-1: none); group g's ranges are group_ranges[group_begin[g] ..
  // group_begin[g + 1]).
  std::vector<int64_t> group_of, group_ranges, group_begin;
  std::vector<std::pair<const void*, int64_t>> query_chunks;  // (first key block, query)
  std::vector<int64_t> active_queries, other_queries;         // FindSharedRanges' work lists
  // Per thread, a shared range's members: their queries, then their scores and sums.
  std::vector<const float*> member_q;
  std::vector<float*> member_rows;
  // Cache-line aligned, and so is each range's block of `partial` and each thread's scores: the
  // V pass loads and stores its accumulators (and the K pass its scores) as whole 64-byte
  // vectors, and a vector split across two lines costs two accesses (batch 32 × 2048 bf16 keys:
  // 5% of the kernel's time in `yoco bench-attention`).
  CacheLineVector<float> partial;  // per range: [q_heads, d] sums, then [q_heads][max, sum]
  CacheLineVector<float> scores;   // per thread: q_heads × range length
  CacheLineVector<float> merge;    // per thread: q_heads maxima and totals
};

void DecodeAttention(const GqaShape& shape, const DecodeQuery* queries, int64_t count,
                     DecodeAttentionScratch* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_DECODE_ATTENTION_H_
