// Rotary position embedding as the reference applies it: interleaved (GPT-J) pairs over the
// whole head, with the reference's linspace frequencies ω_i = θ^(−i/(d/2−1)).
#ifndef YOCO_KERNELS_CPU_ROPE_H_
#define YOCO_KERNELS_CPU_ROPE_H_

#include <cstdint>
#include <vector>

namespace yoco::cpu {

// The fp32 inverse frequencies 1/θ**linspace(0, 1, d/2), computed the way torch does in fp32.
std::vector<float> RopeInverseFrequencies(int head_dim, double theta);

// cos/sin of fp32 angles p·ω_i. Positions below `tabulated` are kept in a table grown on demand;
// later ones (long documents) are computed for the positions a forward pass asks for (Prepare),
// by the same formula, so they are the same bits: a table of a 1M-token context's positions
// would hold 2^21 of them (1 GB for 128-dim heads), and a decode step needs one per sequence.
// Not thread-safe.
class RopeTable {
 public:
  static constexpr int64_t kTabulatedPositions = int64_t{1} << 16;

  RopeTable(int head_dim, double theta, int64_t tabulated = kTabulatedPositions);

  int head_dim() const { return head_dim_; }
  // Makes positions [0, min(n, tabulated)) available.
  void Reserve(int64_t n);
  // Makes every position of `positions` available until the next Prepare.
  void Prepare(const std::vector<int64_t>& positions);
  // [head_dim/2] each; REQUIRES: the position was made available.
  const float* cos(int64_t position) const {
    return position < capacity_ ? cos_.data() + position * (head_dim_ / 2)
                                : extra_cos_.data() + ExtraRow(position) * (head_dim_ / 2);
  }
  const float* sin(int64_t position) const {
    return position < capacity_ ? sin_.data() + position * (head_dim_ / 2)
                                : extra_sin_.data() + ExtraRow(position) * (head_dim_ / 2);
  }

 private:
  // cos and sin of position p into [head_dim/2] each.
  void Fill(int64_t p, float* cos, float* sin) const;
  int64_t ExtraRow(int64_t position) const;

  int head_dim_;
  int64_t tabulated_;
  std::vector<float> inv_freq_;
  int64_t capacity_ = 0;
  std::vector<float> cos_, sin_;  // [capacity, head_dim/2]
  // Positions past the table that the last Prepare asked for, sorted, and their rows.
  std::vector<int64_t> extra_positions_;
  std::vector<float> extra_cos_, extra_sin_;
};

// Rotates `heads` consecutive head vectors of `head_dim` at `x` in place:
// y[2i] = x[2i]·cos − x[2i+1]·sin, y[2i+1] = x[2i]·sin + x[2i+1]·cos.
void ApplyRope(float* x, int heads, int head_dim, const float* cos, const float* sin);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ROPE_H_
