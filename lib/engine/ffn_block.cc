// FFN block.
#include "lib/engine/ffn_block.h"

#include "kernels/cpu/activation.h"
#include "kernels/cpu/rms_norm.h"

namespace yoco {

void FfnBlock(const FfnWeights& w, const float* norm_weight, float eps, float* h, int64_t rows,
              FfnScratch* s, cpu::RowArithmetic arithmetic) {
  const int64_t D = w.fc1.cols, F = w.fc1.rows;
  if (static_cast<int64_t>(s->normed.size()) < rows * D) s->normed.resize(rows * D);
  if (static_cast<int64_t>(s->up.size()) < rows * F) s->up.resize(rows * F);
  if (static_cast<int64_t>(s->gate.size()) < rows * F) s->gate.resize(rows * F);
  cpu::RmsNorm(h, rows, D, D, norm_weight, eps, s->normed.data());
  const cpu::LinearOutput projections[] = {{&w.fc1, s->up.data()}, {&w.gate, s->gate.data()}};
  cpu::FusedLinear(s->normed.data(), rows, projections, &s->wide, arithmetic);
  cpu::SiluMul(s->up.data(), s->gate.data(), rows * F);
  cpu::Linear(s->up.data(), rows, w.fc2, h, /*accumulate=*/true, &s->wide, arithmetic);
}

}  // namespace yoco
