// Machine rate probes.
#include "tools/bench/machine_rates.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace yoco {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SgemmProbe::SgemmProbe() : a_(kN * kN, 0.5f), b_(kN * kN, 0.25f), c_(kN * kN) {}

double SgemmProbe::MeasureGflops() {
  cpu::Gemm(false, true, kN, kN, kN, 1.0f, a_.data(), kN, b_.data(), kN, 0.0f, c_.data(),
            kN);  // warm-up
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = Seconds();
    cpu::Gemm(false, true, kN, kN, kN, 1.0f, a_.data(), kN, b_.data(), kN, 0.0f, c_.data(), kN);
    best = std::min(best, Seconds() - t0);
  }
  return 2.0 * kN * kN * kN / best / 1e9;
}

double MeasureReadBandwidthGbs(int64_t bytes, int passes) {
  return ReadBandwidthProbe(bytes).MeasureGbs(passes);
}

// The memory the loader gives converted weights (huge pages where the kernel has them), so that
// the floor is what the weight stream could reach.
ReadBandwidthProbe::ReadBandwidthProbe(int64_t bytes)
    : buffer_(std::max<int64_t>(bytes / sizeof(float) / 32 * 32, 32) * sizeof(float)) {
  const int64_t n = static_cast<int64_t>(buffer_.size() / sizeof(float));
  float* data = reinterpret_cast<float*>(buffer_.data());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = 1.0f;
}

double ReadBandwidthProbe::MeasureGbs(int passes) const {
  const int64_t n = static_cast<int64_t>(buffer_.size() / sizeof(float));
  const float* data = reinterpret_cast<const float*>(buffer_.data());
  double best = 1e30;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < passes; ++rep) {
    const double t0 = Seconds();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
#ifdef YOCO_AVX2
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(data + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(data + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(data + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(data + i + 24));
      }
      total += cpu::HorizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
#else
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) total += data[i];
#endif
    }
    best = std::min(best, Seconds() - t0);
    sink = sink + total;
  }
  return static_cast<double>(n) * sizeof(float) / best / 1e9;
}

}  // namespace yoco
