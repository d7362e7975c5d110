// Chunkwise gRet: per chunk, the intra-chunk part is a masked (Q Kᵀ ⊙ D) V product, the
// cross-chunk part reads the carried state, and the state is advanced once per chunk. All
// decay factors are exp of non-positive sums, so nothing overflows.
#include "kernels/cpu/gated_retention.h"

#include <cmath>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {

int64_t GatedRetentionScratchFloats(int chunk, int head_dim) {
  return static_cast<int64_t>(chunk) * chunk + 2LL * chunk * head_dim + chunk;
}

void GatedRetentionChunkwise(int64_t T, int d, const float* q, const float* k, const float* v,
                             int64_t ld, const float* log_decay, int64_t decay_stride, float* state,
                             float* out, int64_t ld_out, int chunk, float* scratch) {
  float* scores = scratch;                      // [chunk, chunk]
  float* qs = scores + int64_t{chunk} * chunk;  // [chunk, d]: q S_c, then scaled keys
  float* ks = qs + int64_t{chunk} * d;          // [chunk, d]
  float* cum = ks + int64_t{chunk} * d;         // [chunk]: inclusive cumsum of log γ
  for (int64_t c0 = 0; c0 < T; c0 += chunk) {
    const int n = static_cast<int>(T - c0 < chunk ? T - c0 : chunk);
    const float* qc = q + c0 * ld;
    const float* kc = k + c0 * ld;
    const float* vc = v + c0 * ld;
    float* oc = out + c0 * ld_out;
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
      acc += log_decay[(c0 + j) * decay_stride];
      cum[j] = acc;
    }
    // Intra-chunk: scores[j,u] = (q_j·k_u) exp(G_j − G_u) for u ≤ j.
    Gemm(false, true, n, n, d, 1.0f, qc, ld, kc, ld, 0.0f, scores, n);
    for (int j = 0; j < n; ++j) {
      float* row = scores + int64_t{j} * n;
      int u = 0;
#ifdef YOCO_AVX2
      const __m256 cj = _mm256_set1_ps(cum[j]);
      for (; u + 8 <= j + 1; u += 8) {
        const __m256 decay = Exp8(_mm256_sub_ps(cj, _mm256_loadu_ps(cum + u)));
        _mm256_storeu_ps(row + u, _mm256_mul_ps(_mm256_loadu_ps(row + u), decay));
      }
#endif
      for (; u <= j; ++u) row[u] *= std::exp(cum[j] - cum[u]);
      for (; u < n; ++u) row[u] = 0.0f;
    }
    Gemm(false, false, n, d, n, 1.0f, scores, n, vc, ld, 0.0f, oc, ld_out);
    // Cross-chunk: o_j += exp(G_j) q_j S_c.
    Gemm(false, false, n, d, d, 1.0f, qc, ld, state, d, 0.0f, qs, d);
    for (int j = 0; j < n; ++j) {
      const float f = std::exp(cum[j]);
      float* o = oc + j * ld_out;
      const float* s = qs + int64_t{j} * d;
      for (int i = 0; i < d; ++i) o[i] += f * s[i];
    }
    // State: S_{c+1} = exp(G_last) S_c + Σ_u exp(G_last − G_u) k_uᵀ v_u.
    const float last = cum[n - 1];
    for (int u = 0; u < n; ++u) {
      const float f = std::exp(last - cum[u]);
      const float* ku = kc + u * ld;
      float* dst = ks + int64_t{u} * d;
      for (int i = 0; i < d; ++i) dst[i] = f * ku[i];
    }
    Gemm(true, false, d, d, n, 1.0f, ks, d, vc, ld, std::exp(last), state, d);
  }
}

#if defined(__AVX512F__)
namespace {

// Columns [c0, c0 + 16·kBlocks) of a step over every state row: those columns of v and of out
// stay in registers, where the plain loop loads and stores out[j] again for each row (batch-32
// decode of the 12-layer dim-768 shape, 1152 heads of d = 128, 2 threads: 3.5-6.4 -> 2.5-2.7 ms;
// in `yoco bench`'s profile 5.3-5.6 -> 2.5-2.7 ms a step).
template <int kBlocks>
void StepColumns(int d, int c0, const float* q, const float* k, const float* v, float gamma,
                 float* state, float* out) {
  __m512 vv[kBlocks], acc[kBlocks];
  for (int b = 0; b < kBlocks; ++b) {
    vv[b] = _mm512_loadu_ps(v + c0 + 16 * b);
    acc[b] = _mm512_setzero_ps();
  }
  const __m512 g = _mm512_set1_ps(gamma);
  for (int i = 0; i < d; ++i) {
    float* row = state + int64_t{i} * d + c0;
    const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
    for (int b = 0; b < kBlocks; ++b) {
      const __m512 s = _mm512_fmadd_ps(ki, vv[b], _mm512_mul_ps(g, _mm512_loadu_ps(row + 16 * b)));
      _mm512_storeu_ps(row + 16 * b, s);
      acc[b] = _mm512_fmadd_ps(qi, s, acc[b]);
    }
  }
  for (int b = 0; b < kBlocks; ++b) _mm512_storeu_ps(out + c0 + 16 * b, acc[b]);
}

}  // namespace
#endif

void GatedRetentionStep(int d, const float* q, const float* k, const float* v, float log_decay,
                        float* state, float* out) {
  const float gamma = std::exp(log_decay);
  int c0 = 0;
#if defined(__AVX512F__)
  for (; c0 + 128 <= d; c0 += 128) StepColumns<8>(d, c0, q, k, v, gamma, state, out);
  // The columns left after the blocks of 128, in blocks of 16.
  using StepColumnsFn =
      void (*)(int, int, const float*, const float*, const float*, float, float*, float*);
  static constexpr StepColumnsFn kRemaining[] = {nullptr,        StepColumns<1>, StepColumns<2>,
                                                 StepColumns<3>, StepColumns<4>, StepColumns<5>,
                                                 StepColumns<6>, StepColumns<7>};
  if (const int blocks = (d - c0) / 16; blocks > 0) {
    kRemaining[blocks](d, c0, q, k, v, gamma, state, out);
  }
  c0 += (d - c0) / 16 * 16;
#endif
  for (int j = c0; j < d; ++j) out[j] = 0.0f;
  for (int i = 0; i < d; ++i) {
    float* row = state + int64_t{i} * d;
    const float ki = k[i], qi = q[i];
    for (int j = c0; j < d; ++j) {
      row[j] = gamma * row[j] + ki * v[j];
      out[j] += qi * row[j];
    }
  }
}

}  // namespace yoco::cpu
