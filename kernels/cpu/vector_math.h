// AVX2/FMA building blocks shared by the CPU kernels, with scalar fallbacks when the build
// target lacks AVX2.
#ifndef YOCO_KERNELS_CPU_VECTOR_MATH_H_
#define YOCO_KERNELS_CPU_VECTOR_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define YOCO_AVX2 1
#endif

namespace yoco::cpu {

#ifdef YOCO_AVX2
// The constants of Exp8 and Exp16: x is clamped to [kExpLow, kExpHigh], n = round(x·log2 e),
// r = x − n·ln2 (ln2 in two parts), e^r from a degree-6 polynomial.
inline constexpr float kExpLow = -87.3f, kExpHigh = 88.3f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
inline constexpr float kExpPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// e^x for 8 lanes: x = n·ln2 + r, |r| ≤ ln2/2, degree-6 polynomial for e^r; relative error
// ~2e-7 over the float range; inputs below −87 give 0.
inline __m256 Exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(kExpLow));
  x = _mm256_min_ps(x, _mm256_set1_ps(kExpHigh));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Low), r);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#if defined(__AVX512F__)
// Exp8 on 16 lanes: the same operations lane by lane, so the same bits as two Exp8 calls. (Masked
// forms with every lane set: GCC 12 warns on the plain ones, which start from an undefined
// register.)
inline constexpr __mmask16 kAllLanes = 0xFFFF;
inline __m512 Exp16(__m512 x) {
  x = _mm512_maskz_max_ps(kAllLanes, x, _mm512_set1_ps(kExpLow));
  x = _mm512_maskz_min_ps(kAllLanes, x, _mm512_set1_ps(kExpHigh));
  const __m512 n = _mm512_maskz_roundscale_ps(kAllLanes, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Low), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_maskz_slli_epi32(
      kAllLanes, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAllLanes, n), _mm512_set1_epi32(127)),
      23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// Lanes 0-7 and 8-15 (GCC 12's _mm512_castps512_ps256 warns as the plain forms above do).
inline __m256 LowHalf(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 0));
}
inline __m256 HighHalf(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 1));
}
#endif

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 bf16 values (unaligned) widened to fp32.
inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

// Σ a[i]·b[i].
inline float Dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float sum = 0.0f;
#ifdef YOCO_AVX2
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  sum = HorizontalSum(_mm256_add_ps(s0, s1));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[i] += a·x[i].
inline void Axpy(float a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef YOCO_AVX2
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
#endif
  for (; i < n; ++i) y[i] += a * x[i];
}

// x[i] = e^(x[i] − shift), returning Σ of the results.
inline float ExpShiftSum(float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.0f;
#ifdef YOCO_AVX2
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
#if defined(__AVX512F__)
  // Sixteen values at a time, summed eight at a time as below: the same bits.
  const __m512 vs16 = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs16));
    _mm512_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, LowHalf(e));
    acc = _mm256_add_ps(acc, HighHalf(e));
  }
#endif
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  sum = HorizontalSum(acc);
#endif
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - shift));
  return sum;
}

inline float MaxOf(const float* x, int64_t n) {
  int64_t i = 0;
  float m = -INFINITY;
#ifdef YOCO_AVX2
  if (n >= 8) {
    __m256 vm = _mm256_loadu_ps(x);
    i = 8;
#if defined(__AVX512F__)
    // The largest value is the same whichever order the lanes meet in.
    if (n >= 16) {
      __m512 vm16 = _mm512_loadu_ps(x);
      for (i = 16; i + 16 <= n; i += 16)
        vm16 = _mm512_maskz_max_ps(kAllLanes, vm16, _mm512_loadu_ps(x + i));
      vm = _mm256_max_ps(LowHalf(vm16), HighHalf(vm16));
    }
#endif
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    m = HorizontalMax(vm);
  }
#endif
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_VECTOR_MATH_H_
