// CpuBackend: the exact YOCO forward pass on the CPU (fp32 activations and states, BLAS for
// matrix products). One instance per thread: it owns reusable scratch buffers.
#ifndef YOCO_LIB_ENGINE_CPU_BACKEND_H_
#define YOCO_LIB_ENGINE_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sliding_window_attention.h"
#include "lib/engine/backend.h"

namespace yoco {

struct CpuBackendOptions {
  int threads = 0;  // kernel threads (process-wide); 0: one per core
  // Time each kind of work (a clock read around each, ~100 per decode step): profile() then says
  // where a call's time went.
  bool profile = false;
  // A Forward whose segments are all one token (a decode step) computes each row's products as
  // that row alone would (cpu::RowArithmetic::kPerRow), so a sequence's tokens are the same bits
  // whatever else shares its step. Off: past the rows a matrix streams, sgemm, whose bits depend
  // on the batch's size (the README's performance section gives the cost).
  bool batch_invariant = true;
};

// Milliseconds by kind of work, summed over the calls since the last reset.
struct CpuProfile {
  double projection_ms = 0;  // mixer, shared K/V and output products
  double ffn_ms = 0;         // the FFN blocks (norm, two fused products, gate, product)
  double retention_ms = 0;   // gated retention (or sliding-window attention)
  double attention_ms = 0;   // the cross decoder's attention over the shared K/V
  // Wall time of the calls; the rest of it is norms, RoPE, the embedding and the K/V appends.
  double total_ms = 0;
  int calls = 0;  // Forward calls
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(std::shared_ptr<const Model> model, CpuBackendOptions options = {});

  const Model& model() const override { return *model_; }
  absl::Status Forward(absl::Span<const ForwardSegment> segments,
                       std::vector<float>* logits) override;

  const CpuProfile& profile() const { return profile_; }
  void ResetProfile() { profile_ = {}; }

 private:
  // Per-row bookkeeping of one Forward call.
  struct Row {
    int segment;
    int64_t position;
  };

  void SelfLayer(int layer, absl::Span<const ForwardSegment> segments);
  void GatedRetentionMixer(int layer, absl::Span<const ForwardSegment> segments);
  void SlidingWindowMixer(int layer, absl::Span<const ForwardSegment> segments);
  void AppendSharedKv(absl::Span<const ForwardSegment> segments);
  void CrossLayer(int layer, absl::Span<const ForwardSegment> segments);
  // Runs `work`, adding its wall time to `kind` when profiling.
  template <typename Work>
  void Timed(double CpuProfile::*kind, Work work);

  std::shared_ptr<const Model> model_;
  CpuBackendOptions options_;
  // This Forward's: kPerRow for a batch-invariant decode step.
  cpu::RowArithmetic arithmetic_ = cpu::RowArithmetic::kFastest;
  CpuProfile profile_;
  const ModelConfig& config_;
  const ModelWeights& weights_;
  cpu::RopeTable self_rope_;             // head dim ds
  cpu::RopeTable cross_rope_;            // head dim da
  std::vector<int64_t> rope_positions_;  // the rows' positions, for the tables' Prepare

  // Scratch, grown on demand and reused across calls.
  std::vector<Row> rows_;               // [R] every input row
  std::vector<int64_t> out_rows_;       // [Q] input row index of each logits row
  std::vector<int64_t> segment_begin_;  // [segments] first row of each segment
  std::vector<float> h_;                // [R, D] residual stream of the self-decoder
  std::vector<float> a_;                // [R, D] normed input
  std::vector<float> q_, k_, v_, g_;    // [R, D] projections
  std::vector<float> gt_;               // [R, Hs] decay logits, then log-decay
  std::vector<float> o_;                // [R, D] mixer output
  FfnScratch ffn_scratch_;
  std::vector<float> kv_k_, kv_v_;    // [R, kv_dim]
  std::vector<float> wide_kv_;        // bf16 shared K then V widened for the blocked kernel
  std::vector<float> hx_;             // [Q, D] residual stream of the cross-decoder
  std::vector<float> scratch_;        // kernel scratch
  std::vector<float> wide_;           // bf16 weight blocks widened for sgemm
  std::vector<int64_t> single_rows_;  // cross-decoder rows attended one at a time
  cpu::SlidingWindowScratch window_scratch_;
  std::vector<cpu::DecodeQuery> decode_queries_;
  cpu::DecodeAttentionScratch decode_scratch_;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_CPU_BACKEND_H_
