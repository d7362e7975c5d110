// Slow, obviously right double-precision versions of the model's math, written straight from
// the formulas (no chunking, no caches). Kernel tests compare the fast fp32 code against them.
#ifndef YOCO_TESTS_REFERENCE_REFERENCE_MATH_H_
#define YOCO_TESTS_REFERENCE_REFERENCE_MATH_H_

#include <cstdint>
#include <vector>

namespace yoco::reference {

// Row-major matrix of doubles.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(r * c, 0.0) {}
  double& at(int64_t r, int64_t c) { return v[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

// Parallel form of gated retention: o_t = Σ_{u≤t} (q_t·k_u) exp(Σ_{s=u+1..t} log γ_s) v_u
// + exp(Σ_{s≤t} log γ_s) q_t S0. Also returns the state after the last token (from the
// definition S_T = Π γ S0 + Σ_u Π_{s>u} γ_s k_uᵀ v_u).
Mat GatedRetentionParallel(const Mat& q, const Mat& k, const Mat& v,
                           const std::vector<double>& log_decay, const Mat& s0, Mat* final_state);

// Causal softmax attention of one query over keys [n, d] with values [n, d].
std::vector<double> Attention(const std::vector<double>& q, const Mat& keys, const Mat& values,
                              double scale);

// x * 1/sqrt(mean(x²) + eps) * weight (weight may be empty).
std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<double>& weight,
                            double eps);

// Interleaved RoPE with ω_i = θ^(−i/(d/2−1)) at position p, angles in double.
std::vector<double> Rope(const std::vector<double>& x, int64_t p, double theta);

}  // namespace yoco::reference

#endif  // YOCO_TESTS_REFERENCE_REFERENCE_MATH_H_
