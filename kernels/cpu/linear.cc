// Two regimes. Few rows (decode): a streaming kernel reads each weight row once per step and
// applies it to every input row, so the step costs one pass over the weights. Many rows
// (prefill): fp32 weights go straight to sgemm; bf16 weights are widened a block of rows at a
// time, a cost amortised over the m input rows.
#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

// Below this many input rows the streaming kernel wins (measured: sgemm reaches its rate from
// about 16 rows on).
constexpr int64_t kStreamingRows = 8;
constexpr int64_t kWidenBlockRows = 256;

#ifdef YOCO_AVX2
template <WeightType kType>
inline __m256 LoadWeights8(const void* row, int64_t i) {
  if constexpr (kType == WeightType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    return LoadBf16x8(static_cast<const uint16_t*>(row) + i);
  }
}
#endif

template <WeightType kType>
inline float WeightAt(const void* row, int64_t i) {
  if constexpr (kType == WeightType::kF32) {
    return static_cast<const float*>(row)[i];
  } else {
    const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
}

// y[r, n] for r < m ≤ kStreamingRows over output rows [n0, n1).
template <WeightType kType>
void StreamRows(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
                int64_t n0, int64_t n1) {
  const int64_t k = w.cols;
  const int64_t elem = kType == WeightType::kF32 ? 4 : 2;
  for (int64_t n = n0; n < n1; ++n) {
    const void* row = static_cast<const char*>(w.data) + n * k * elem;
    float sums[kStreamingRows];
    int64_t i = 0;
#ifdef YOCO_AVX2
    __m256 acc[kStreamingRows];
    for (int64_t r = 0; r < m; ++r) acc[r] = _mm256_setzero_ps();
    for (; i + 8 <= k; i += 8) {
      const __m256 wv = LoadWeights8<kType>(row, i);
      for (int64_t r = 0; r < m; ++r) acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k + i), acc[r]);
    }
    for (int64_t r = 0; r < m; ++r) sums[r] = HorizontalSum(acc[r]);
#else
    for (int64_t r = 0; r < m; ++r) sums[r] = 0.0f;
#endif
    for (; i < k; ++i) {
      const float wi = WeightAt<kType>(row, i);
      for (int64_t r = 0; r < m; ++r) sums[r] += wi * x[r * k + i];
    }
    for (int64_t r = 0; r < m; ++r) {
      y[r * w.rows + n] = accumulate ? y[r * w.rows + n] + sums[r] : sums[r];
    }
  }
}

template <WeightType kType>
void Stream(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate) {
  // Output rows are split across threads in blocks big enough to amortise the fork.
#pragma omp parallel for schedule(static) if (w.rows * w.cols >= (1 << 16))
  for (int64_t b = 0; b < (w.rows + 63) / 64; ++b) {
    StreamRows<kType>(x, m, w, y, accumulate, b * 64, std::min(w.rows, (b + 1) * 64));
  }
}

}  // namespace

void WeightMatrix::RowToFloat(int64_t r, float* out) const {
  if (type == WeightType::kF32) {
    std::memcpy(out, static_cast<const float*>(data) + r * cols, cols * sizeof(float));
    return;
  }
  const uint16_t* row = static_cast<const uint16_t*>(data) + r * cols;
  for (int64_t i = 0; i < cols; ++i) out[i] = WeightAt<WeightType::kBF16>(row, i);
}

void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
            std::vector<float>* scratch) {
  if (m == 0) return;
  const int64_t k = w.cols, n = w.rows;
  if (m <= kStreamingRows) {
    if (w.type == WeightType::kF32) {
      Stream<WeightType::kF32>(x, m, w, y, accumulate);
    } else {
      Stream<WeightType::kBF16>(x, m, w, y, accumulate);
    }
    return;
  }
  if (w.type == WeightType::kF32) {
    Gemm(false, true, m, n, k, 1.0f, x, k, static_cast<const float*>(w.data), k,
         accumulate ? 1.0f : 0.0f, y, n);
    return;
  }
  const int64_t block = std::min(kWidenBlockRows, n);
  if (static_cast<int64_t>(scratch->size()) < block * k) scratch->resize(block * k);
  float* wide = scratch->data();
  for (int64_t n0 = 0; n0 < n; n0 += block) {
    const int64_t nb = std::min(block, n - n0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb; ++r) w.RowToFloat(n0 + r, wide + r * k);
    Gemm(false, true, m, nb, k, 1.0f, x, k, wide, k, accumulate ? 1.0f : 0.0f, y + n0, n);
  }
}

}  // namespace yoco::cpu
