// Matrix products for the CPU backend through oneDNN's sgemm (row-major), and the thread count
// of the CPU kernels.
//
// oneDNN rather than OpenBLAS, by measurement on the 2-core AVX2 build machine: equal on large
// products (2048³: 153 vs 165 GFLOPS), 1.6x faster on the gated-retention chunk shape
// (256x256x128: 149 vs 94) and 2.7x faster on single-row products (1x32000x768: 13.1 vs 4.9).
#ifndef YOCO_KERNELS_CPU_GEMM_H_
#define YOCO_KERNELS_CPU_GEMM_H_

#include <cstdint>

namespace yoco::cpu {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major with leading dimensions; op(X) = Xᵀ when
// the matching `trans_*` is true. Runs on the kernel threads, or on the calling thread alone
// when called from inside a parallel region.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Sets how many threads the CPU kernels (and oneDNN) use; 0 leaves the default (one per core).
// Process-wide: the OpenMP pool is shared.
void SetKernelThreads(int threads);
int KernelThreads();

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_GEMM_H_
