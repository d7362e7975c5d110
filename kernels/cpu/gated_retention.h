// Gated retention (gRet) for one head, in its chunkwise form (prefill) and its recurrent form
// (decode). Both compute o_t = Σ_{u≤t} (q_t·k_u) Π_{s=u+1..t} γ_s v_u + q_t (Π_{s≤t} γ_s) S_0
// and leave S_T = γ_T S_{T−1} + k_Tᵀ v_T in `state`.
//
// Conventions: k is already RoPE'd and scaled by d^−1/2; log_decay[t] = log γ_t ≤ 0; the
// state S is [d (k index), d (v index)] fp32, row-major.
#ifndef YOCO_KERNELS_CPU_GATED_RETENTION_H_
#define YOCO_KERNELS_CPU_GATED_RETENTION_H_

#include <cstdint>

namespace yoco::cpu {

// The reference's chunk size.
inline constexpr int kRetentionChunk = 256;

// Floats of scratch GatedRetentionChunkwise needs.
int64_t GatedRetentionScratchFloats(int chunk, int head_dim);

// Processes T tokens in chunks of `chunk`. q/k/v rows have stride `ld` (so one head of a
// [T, heads*d] buffer can be passed with ld = heads*d); log_decay has stride `decay_stride`;
// out rows have stride `ld_out`.
void GatedRetentionChunkwise(int64_t T, int d, const float* q, const float* k, const float* v,
                             int64_t ld, const float* log_decay, int64_t decay_stride, float* state,
                             float* out, int64_t ld_out, int chunk, float* scratch);

// One token: S = γ S + kᵀ v; out = q S.
void GatedRetentionStep(int d, const float* q, const float* k, const float* v, float log_decay,
                        float* state, float* out);

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_GATED_RETENTION_H_
