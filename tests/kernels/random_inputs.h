// Seeded random inputs for kernel tests, as fp32 buffers and their double twins.
#ifndef YOCO_TESTS_KERNELS_RANDOM_INPUTS_H_
#define YOCO_TESTS_KERNELS_RANDOM_INPUTS_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/reference/reference_math.h"

namespace yoco::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Column block [col0, col0+cols) of a row-major float buffer with row stride ld, as doubles.
inline reference::Mat ToMat(const float* data, int64_t rows, int64_t cols, int64_t ld,
                            int64_t col0 = 0) {
  reference::Mat m(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m.at(r, c) = data[r * ld + col0 + c];
  return m;
}

// max |a − b| over the block, and max |b|.
struct ErrorStats {
  double max_abs_error = 0;
  double max_abs_reference = 0;
  double relative() const { return max_abs_error / std::max(max_abs_reference, 1e-30); }
};

inline ErrorStats Compare(const float* got, int64_t ld, int64_t col0, const reference::Mat& want) {
  ErrorStats e;
  for (int64_t r = 0; r < want.rows; ++r) {
    for (int64_t c = 0; c < want.cols; ++c) {
      e.max_abs_error =
          std::max(e.max_abs_error, std::fabs(got[r * ld + col0 + c] - want.at(r, c)));
      e.max_abs_reference = std::max(e.max_abs_reference, std::fabs(want.at(r, c)));
    }
  }
  return e;
}

}  // namespace yoco::testing

#endif  // YOCO_TESTS_KERNELS_RANDOM_INPUTS_H_
