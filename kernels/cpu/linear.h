// Linear layers y = x Wᵀ over weights stored as fp32 or bf16 (bf16 halves the bytes a decode
// step streams; arithmetic stays fp32).
#ifndef YOCO_KERNELS_CPU_LINEAR_H_
#define YOCO_KERNELS_CPU_LINEAR_H_

#include <cstdint>
#include <vector>

namespace yoco::cpu {

enum class WeightType { kF32, kBF16 };

// A Linear layer's weight [rows = out, cols = in], row-major.
struct WeightMatrix {
  const void* data = nullptr;
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t bytes() const { return rows * cols * (type == WeightType::kF32 ? 4 : 2); }
  // Row r widened to fp32 into out[cols].
  void RowToFloat(int64_t r, float* out) const;
};

// y[m, w.rows] = x[m, w.cols] · Wᵀ (+ y when `accumulate`: the residual add folded in).
// `scratch` holds widened bf16 blocks for large m.
void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
            std::vector<float>* scratch);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_LINEAR_H_
