// Gemm on oneDNN.
#include "kernels/cpu/gemm.h"

#include <dnnl.h>
#include <omp.h>

namespace yoco::cpu {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
             ldc);
}

void SetKernelThreads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

int KernelThreads() { return omp_get_max_threads(); }

}  // namespace yoco::cpu
