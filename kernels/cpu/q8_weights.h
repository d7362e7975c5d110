// 8-bit weights (WeightType::kQ8): each row cut into blocks of 32 columns, each block stored as
// int8 values with one fp32 scale (max |w| / 127), as llama.cpp's Q8_0 but with the activations
// left in fp32. A decode step then streams 1.125 bytes per weight instead of bf16's 2.
//
// Layout: rows in groups of 32 (the last group padded with zero rows); a group is cols / 32
// chunks, each the 32 rows' scales (32 floats) followed by the block's 32 columns, each column
// the 32 rows' int8 values side by side. A group is one contiguous stream, and a column of 16
// rows widens to one AVX-512 vector (8 to an AVX2 one) whose lanes are 16 whole results, as in
// the packed bf16 layout (linear.h): no sums across lanes.
#ifndef YOCO_KERNELS_CPU_Q8_WEIGHTS_H_
#define YOCO_KERNELS_CPU_Q8_WEIGHTS_H_

#include <cstdint>

namespace yoco::cpu {

constexpr int64_t kQ8Block = 32;      // columns per scale
constexpr int64_t kQ8GroupRows = 32;  // rows stored together
constexpr int64_t kQ8ChunkBytes = kQ8GroupRows * (sizeof(float) + kQ8Block);

// True when a [rows, cols] matrix can be held as q8 (whole blocks per row).
inline bool CanQuantizeQ8(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && cols % kQ8Block == 0;
}

// Groups of a q8 matrix of `rows` rows (the last one may be partly padding).
inline int64_t Q8Groups(int64_t rows) { return (rows + kQ8GroupRows - 1) / kQ8GroupRows; }

// Bytes of a [rows, cols] q8 matrix, padding included. REQUIRES: CanQuantizeQ8(rows, cols).
inline int64_t Q8Bytes(int64_t rows, int64_t cols) {
  return Q8Groups(rows) * (cols / kQ8Block) * kQ8ChunkBytes;
}

// Quantizes row-major fp32 `src` [rows, cols] into `dst` (Q8Bytes(rows, cols) bytes): per block
// scale = max |w| / 127 and q = round(w / scale) (a block of zeros: scale 0).
// REQUIRES: CanQuantizeQ8(rows, cols).
void QuantizeQ8(const float* src, int64_t rows, int64_t cols, uint8_t* dst);

// Row r of a q8 matrix as fp32 (q · scale, one rounding) into out[cols].
void Q8RowToFloat(const uint8_t* data, int64_t cols, int64_t r, float* out);

// Rows [r0, r1) of a q8 matrix as fp32 columns: out[c * ld + (r - r0)] = q · scale, the same
// values as Q8RowToFloat, in the form sgemm reads as y = x · W_block (linear.cc's widening).
void Q8WidenColumns(const uint8_t* data, int64_t cols, int64_t r0, int64_t r1, float* out,
                    int64_t ld);

// y[i, n] (+)= Σ_c x[i, c] · w[n, c] for input rows i < m and weight rows n in the groups
// [g0, g1), rows at or beyond `rows` skipped. Per output, each block's t = Σ q · x is one chain
// of fused multiply-adds over its columns in order, and the blocks' t · scale one more over the
// blocks, whatever m, the tile and the instruction set (AVX-512, AVX2 or neither): a row's result
// does not depend on how many rows are computed with it.
void Q8StreamGroups(const float* x, int64_t m, const uint8_t* data, int64_t rows, int64_t cols,
                    float* y, bool accumulate, int64_t g0, int64_t g1);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_Q8_WEIGHTS_H_
