// RoPE tables and rotation.
#include "kernels/cpu/rope.h"

#include <algorithm>
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

RopeTable::RopeTable(int head_dim, double theta, int64_t tabulated)
    : head_dim_(head_dim),
      tabulated_(tabulated),
      inv_freq_(RopeInverseFrequencies(head_dim, theta)) {}

void RopeTable::Fill(int64_t p, float* cos, float* sin) const {
  for (int i = 0; i < head_dim_ / 2; ++i) {
    const float angle = static_cast<float>(p) * inv_freq_[i];  // fp32, as the reference
    cos[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    sin[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

void RopeTable::Reserve(int64_t n) {
  n = std::min(n, tabulated_);
  if (n <= capacity_) return;
  int64_t new_capacity = capacity_ == 0 ? std::min<int64_t>(1024, tabulated_) : capacity_;
  while (new_capacity < n) new_capacity = std::min(2 * new_capacity, tabulated_);
  const int half = head_dim_ / 2;
  cos_.resize(new_capacity * half);
  sin_.resize(new_capacity * half);
  for (int64_t p = capacity_; p < new_capacity; ++p) Fill(p, &cos_[p * half], &sin_[p * half]);
  capacity_ = new_capacity;
}

void RopeTable::Prepare(const std::vector<int64_t>& positions) {
  int64_t most_tabulated = -1;
  extra_positions_.clear();
  for (int64_t p : positions) {
    if (p < tabulated_) {
      most_tabulated = std::max(most_tabulated, p);
    } else {
      extra_positions_.push_back(p);
    }
  }
  Reserve(most_tabulated + 1);
  std::sort(extra_positions_.begin(), extra_positions_.end());
  extra_positions_.erase(std::unique(extra_positions_.begin(), extra_positions_.end()),
                         extra_positions_.end());
  const int half = head_dim_ / 2;
  extra_cos_.resize(extra_positions_.size() * half);
  extra_sin_.resize(extra_positions_.size() * half);
  for (size_t i = 0; i < extra_positions_.size(); ++i) {
    Fill(extra_positions_[i], &extra_cos_[i * half], &extra_sin_[i * half]);
  }
}

int64_t RopeTable::ExtraRow(int64_t position) const {
  return std::lower_bound(extra_positions_.begin(), extra_positions_.end(), position) -
         extra_positions_.begin();
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
