// Rotary position embedding as the reference applies it: interleaved (GPT-J) pairs over the
// whole head, with the reference's linspace frequencies ω_i = θ^(−i/(d/2−1)).
#ifndef YOCO_KERNELS_CPU_ROPE_H_
#define YOCO_KERNELS_CPU_ROPE_H_

#include <cstdint>
#include <vector>

namespace yoco::cpu {

// The fp32 inverse frequencies 1/θ**linspace(0, 1, d/2), computed the way torch does in fp32.
std::vector<float> RopeInverseFrequencies(int head_dim, double theta);

// cos/sin of fp32 angles p·ω_i for positions [0, capacity), grown on demand. Not thread-safe.
class RopeTable {
 public:
  RopeTable(int head_dim, double theta);

  int head_dim() const { return head_dim_; }
  // Makes positions [0, n) available.
  void Reserve(int64_t n);
  // [head_dim/2] each; REQUIRES: Reserve(position + 1) was called.
  const float* cos(int64_t position) const { return cos_.data() + position * (head_dim_ / 2); }
  const float* sin(int64_t position) const { return sin_.data() + position * (head_dim_ / 2); }

 private:
  int head_dim_;
  std::vector<float> inv_freq_;
  int64_t capacity_ = 0;
  std::vector<float> cos_, sin_;  // [capacity, head_dim/2]
};

// Rotates `heads` consecutive head vectors of `head_dim` at `x` in place:
// y[2i] = x[2i]·cos − x[2i+1]·sin, y[2i+1] = x[2i]·sin + x[2i+1]·cos.
void ApplyRope(float* x, int heads, int head_dim, const float* cos, const float* sin);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_ROPE_H_
