// RoPE tables and rotation.
#include "kernels/cpu/rope.h"

#include <cmath>

namespace yoco::cpu {

std::vector<float> RopeInverseFrequencies(int head_dim, double theta) {
  // torch.linspace in fp32 fills the first half from the start and the second from the end.
  const int n = head_dim / 2;
  const float step = 1.0f / static_cast<float>(n - 1);
  std::vector<float> inv(n);
  for (int i = 0; i < n; ++i) {
    const float e =
        i < n / 2 ? step * static_cast<float>(i) : 1.0f - step * static_cast<float>(n - 1 - i);
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), e);
  }
  return inv;
}

RopeTable::RopeTable(int head_dim, double theta)
    : head_dim_(head_dim), inv_freq_(RopeInverseFrequencies(head_dim, theta)) {}

void RopeTable::Reserve(int64_t n) {
  if (n <= capacity_) return;
  int64_t new_capacity = capacity_ == 0 ? 1024 : capacity_;
  while (new_capacity < n) new_capacity *= 2;
  const int half = head_dim_ / 2;
  cos_.resize(new_capacity * half);
  sin_.resize(new_capacity * half);
  for (int64_t p = capacity_; p < new_capacity; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq_[i];  // fp32, as the reference
      cos_[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  capacity_ = new_capacity;
}

void ApplyRope(float* x, int heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cos[i] - x1 * sin[i];
      v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace yoco::cpu
