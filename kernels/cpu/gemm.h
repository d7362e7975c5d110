// Matrix products for the CPU backend, through the system BLAS (row-major).
#ifndef YOCO_KERNELS_CPU_GEMM_H_
#define YOCO_KERNELS_CPU_GEMM_H_

#include <cstdint>

namespace yoco::cpu {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major with leading dimensions; op(X) = Xᵀ when
// the matching `trans_*` is true.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// A Linear layer: y[m, n] = x[m, k] · w[n, k]ᵀ, plus y's old value when `accumulate` (the
// residual add folded into the product).
void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y,
            bool accumulate = false);

// Sets the BLAS thread count (0: leave the library's default).
void SetBlasThreads(int threads);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_GEMM_H_
