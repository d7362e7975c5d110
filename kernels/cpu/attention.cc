// Attention kernels. Scores are max-subtracted before the exponent; the many-query path works
// on blocks of queries so both products (Q Kᵀ and P V) are sgemm calls.
#include "kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;

}  // namespace

void CausalAttention(const GqaShape& shape, int64_t p0, int64_t T, const float* q, int64_t ldq,
                     const float* keys, const float* values, int64_t ldkv, int64_t window,
                     float* out, int64_t ldo, std::vector<float>* scratch) {
  const int d = shape.head_dim;
  const int group = shape.q_heads / shape.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const int64_t max_keys = p0 + T;
  const int threads = omp_get_max_threads();
  const int64_t per_thread = kQueryBlock * max_keys;
  if (static_cast<int64_t>(scratch->size()) < threads * per_thread)
    scratch->resize(threads * per_thread);
  float* scratch_base = scratch->data();

  // Tasks: (query head, query block). Larger blocks of later queries see more keys, so
  // dynamic scheduling balances them.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < int64_t{shape.q_heads} * blocks; ++task) {
    const int h = static_cast<int>(task / blocks);
    const int64_t b = task % blocks;
    const int64_t t0 = b * kQueryBlock;
    const int64_t nq = std::min(kQueryBlock, T - t0);
    const int64_t last_key = p0 + t0 + nq;  // one past the last key any query here sees
    const int64_t first_key = window > 0 ? std::max<int64_t>(0, p0 + t0 - window + 1) : 0;
    const int64_t nk = last_key - first_key;
    const int kvh = h / group;
    float* s = scratch_base + omp_get_thread_num() * per_thread;
    const float* qb = q + t0 * ldq + int64_t{h} * d;
    const float* kb = keys + first_key * ldkv + int64_t{kvh} * d;
    const float* vb = values + first_key * ldkv + int64_t{kvh} * d;
    Gemm(false, true, nq, nk, d, scale, qb, ldq, kb, ldkv, 0.0f, s, nk);
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t pos = p0 + t0 + i;
      // Keys [lo, hi) of this row, relative to first_key.
      const int64_t hi = pos + 1 - first_key;
      const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1 - first_key) : 0;
      float* row = s + i * nk;
      const float inv = 1.0f / ExpShiftSum(row + lo, hi - lo, MaxOf(row + lo, hi - lo));
      for (int64_t j = 0; j < lo; ++j) row[j] = 0.0f;
      for (int64_t j = lo; j < hi; ++j) row[j] *= inv;
      for (int64_t j = hi; j < nk; ++j) row[j] = 0.0f;
    }
    Gemm(false, false, nq, d, nk, 1.0f, s, nk, vb, ldkv, 0.0f, out + t0 * ldo + int64_t{h} * d,
         ldo);
  }
}

}  // namespace yoco::cpu
