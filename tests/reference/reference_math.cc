// Double-precision reference math.
#include "tests/reference/reference_math.h"

#include <cmath>

namespace yoco::reference {

Mat GatedRetentionParallel(const Mat& q, const Mat& k, const Mat& v,
                           const std::vector<double>& log_decay, const Mat& s0, Mat* final_state) {
  const int64_t T = q.rows, d = q.cols;
  std::vector<double> cum(T + 1, 0.0);  // cum[t+1] = Σ_{s≤t} log γ_s
  for (int64_t t = 0; t < T; ++t) cum[t + 1] = cum[t] + log_decay[t];
  Mat out(T, d);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u <= t; ++u) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i) dot += q.at(t, i) * k.at(u, i);
      const double w = dot * std::exp(cum[t + 1] - cum[u + 1]);
      for (int64_t j = 0; j < d; ++j) out.at(t, j) += w * v.at(u, j);
    }
    const double f = std::exp(cum[t + 1]);
    for (int64_t j = 0; j < d; ++j) {
      double qs = 0;
      for (int64_t i = 0; i < d; ++i) qs += q.at(t, i) * s0.at(i, j);
      out.at(t, j) += f * qs;
    }
  }
  if (final_state) {
    Mat s(d, d);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) s.at(i, j) = std::exp(cum[T]) * s0.at(i, j);
    for (int64_t u = 0; u < T; ++u) {
      const double f = std::exp(cum[T] - cum[u + 1]);
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j) s.at(i, j) += f * k.at(u, i) * v.at(u, j);
    }
    *final_state = s;
  }
  return out;
}

std::vector<double> Attention(const std::vector<double>& q, const Mat& keys, const Mat& values,
                              double scale) {
  const int64_t n = keys.rows, d = keys.cols;
  std::vector<double> scores(n);
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += q[j] * keys.at(i, j);
    scores[i] = dot * scale;
    mx = std::max(mx, scores[i]);
  }
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - mx));
  std::vector<double> out(values.cols, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < values.cols; ++j) out[j] += scores[i] / sum * values.at(i, j);
  return out;
}

std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<double>& weight,
                            double eps) {
  double ms = 0;
  for (double e : x) ms += e * e;
  ms /= static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = x[i] / std::sqrt(ms + eps) * (weight.empty() ? 1.0 : weight[i]);
  }
  return y;
}

std::vector<double> Rope(const std::vector<double>& x, int64_t p, double theta) {
  const int64_t half = static_cast<int64_t>(x.size()) / 2;
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < half; ++i) {
    const double omega = std::pow(theta, -static_cast<double>(i) / static_cast<double>(half - 1));
    const double c = std::cos(p * omega), s = std::sin(p * omega);
    y[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
    y[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c;
  }
  return y;
}

}  // namespace yoco::reference
