// The pre-norm SwiGLU feed-forward block both decoders (and the Transformer baseline) use:
// h += fc2(silu(fc1(RMSNorm(h))) ⊙ gate(RMSNorm(h))).
#ifndef YOCO_LIB_ENGINE_FFN_BLOCK_H_
#define YOCO_LIB_ENGINE_FFN_BLOCK_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/linear.h"

namespace yoco {

struct FfnWeights {
  cpu::WeightMatrix fc1;   // [F, D], the SiLU branch
  cpu::WeightMatrix gate;  // [F, D], the linear branch
  cpu::WeightMatrix fc2;   // [D, F]
};

// Reusable buffers of FfnBlock.
struct FfnScratch {
  std::vector<float> normed, up, gate, wide;
};

// Adds the block's output to h [rows, D] in place; `arithmetic` as cpu::Linear's.
void FfnBlock(const FfnWeights& w, const float* norm_weight, float eps, float* h, int64_t rows,
              FfnScratch* scratch, cpu::RowArithmetic arithmetic = cpu::RowArithmetic::kFastest);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_FFN_BLOCK_H_
