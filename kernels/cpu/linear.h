// Linear layers y = x Wᵀ over weights stored as fp32, bf16 or q8 (bf16 halves the bytes a
// decode step streams, q8 (q8_weights.h) nearly halves them again; arithmetic stays fp32).
#ifndef YOCO_KERNELS_CPU_LINEAR_H_
#define YOCO_KERNELS_CPU_LINEAR_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/cpu/q8_weights.h"

namespace yoco::cpu {

enum class WeightType { kF32, kBF16, kQ8 };

// A Linear layer's weight [rows = out, cols = in], row-major unless `packed`.
struct WeightMatrix {
  const void* data = nullptr;
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  // bf16 only (see PackBf16Rows): rows [0, rows - rows % 32) are stored in groups of 32 rows,
  // each group as cols / 2 column pairs of 32 rows × 2 columns (a row's two values side by side),
  // so a decode step reads a group as one contiguous stream instead of 32 short ones the hardware
  // prefetcher barely follows, and widens a row's pair to fp32 with a shift and a mask. The
  // remaining rows follow row-major.
  bool packed = false;

  int64_t bytes() const {
    if (type == WeightType::kQ8) return Q8Bytes(rows, cols);
    return rows * cols * (type == WeightType::kF32 ? 4 : 2);
  }
  // Row r widened to fp32 into out[cols].
  void RowToFloat(int64_t r, float* out) const;
};

// Rows in a packed bf16 group (WeightMatrix::packed).
constexpr int64_t kPackedGroupRows = 32;

// Where row j (< kPackedGroupRows) and column c of a packed group are, from the group's start.
inline int64_t PackedIndex(int64_t j, int64_t c) {
  return (c / 2) * 2 * kPackedGroupRows + j * 2 + c % 2;
}

// True when a [rows, cols] bf16 matrix can be packed (a group of rows at least, cols even).
inline bool CanPackBf16(int64_t rows, int64_t cols) {
  return rows >= kPackedGroupRows && cols % 2 == 0;
}

// Writes row-major bf16 `src` [rows, cols] to `dst` (as many elements) in WeightMatrix::packed's
// layout. REQUIRES: CanPackBf16(rows, cols).
void PackBf16Rows(const uint16_t* src, int64_t rows, int64_t cols, uint16_t* dst);

// Up to how many input rows Linear streams `w` (reads each weight once and applies it to every
// row) rather than widening it for sgemm. There a row's result is the same bits whatever the
// number of rows computed with it, so a sequence's tokens do not depend on its decode batch.
int64_t StreamingRows(const WeightMatrix& w);

// Whether a row's result may depend on the rows computed with it.
enum class RowArithmetic {
  // Past StreamingRows rows, sgemm (or widened blocks): fastest, and a row's bits depend on m.
  kFastest,
  // Every row streamed, in blocks of at most StreamingRows rows: each row gets the bits it gets
  // alone, whatever m. For rows of independent sequences (a decode step's batch), so that a
  // sequence's tokens do not depend on who else is decoding (batch invariance); it re-reads the
  // weights once per block, which costs where a matrix streams few rows (fp32 rows: 8).
  kPerRow,
};

// y[m, w.rows] = x[m, w.cols] · Wᵀ (+ y when `accumulate`: the residual add folded in).
// `scratch` holds widened bf16 or q8 blocks for large m.
void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
            std::vector<float>* scratch, RowArithmetic arithmetic = RowArithmetic::kFastest);

// One product of FusedLinear: y[m, w->rows] = x · w->ᵀ.
struct LinearOutput {
  const WeightMatrix* w;
  float* y;
};

// The products of several matrices with the same input rows (a layer's q/k/v/g projections, the
// FFN's fc1 and gate) in one pass, so the threads meet once for all of them and, where the rows
// are widened for sgemm, each call covers rows of several matrices. A y that Linear would stream
// holds the bits Linear gives it alone; the others the same values to rounding. The matrices
// share `cols`.
void FusedLinear(const float* x, int64_t m, absl::Span<const LinearOutput> outputs,
                 std::vector<float>* scratch, RowArithmetic arithmetic = RowArithmetic::kFastest);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_LINEAR_H_
