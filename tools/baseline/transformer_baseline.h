// TransformerBaseline: a decoder-only Transformer of YOCO's shape, for the benchmark only. Every
// one of its n_layers layers is causal GQA attention (n_attn_heads over n_attn_kv_heads, head
// dim dim/n_attn_heads) with its own K/V cache, then the same SwiGLU FFN; it runs on the same
// kernels as the YOCO engine, so the benchmark's ratios measure the architecture, not the code.
#ifndef YOCO_TOOLS_BASELINE_TRANSFORMER_BASELINE_H_
#define YOCO_TOOLS_BASELINE_TRANSFORMER_BASELINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/rope.h"
#include "lib/engine/ffn_block.h"
#include "lib/engine/kv_rows.h"
#include "lib/engine/model_weights.h"
#include "lib/model/model_config.h"

namespace yoco {

class TransformerBaseline {
 public:
  struct Sequence {
    int64_t position = 0;
    std::vector<KvRows> k, v;  // per layer [position, n_attn_kv_heads * da], K RoPE'd
    int64_t bytes() const;
  };

  // Random weights (uniform, std 0.02; norms 1) held as fp32 or bf16 matrices; K/V held in
  // config.kv_dtype.
  TransformerBaseline(const ModelConfig& config, WeightFormat format, uint64_t seed);

  Sequence NewSequence() const;

  // Runs tokens[i] after sequences[i]'s state; `logits` gets [sequences, vocab], each sequence's
  // last-token logits. INVALID_ARGUMENT for empty inputs or bad ids.
  absl::Status Forward(absl::Span<Sequence* const> sequences,
                       absl::Span<const absl::Span<const int32_t>> tokens,
                       std::vector<float>* logits);

  // The matrices a decode step reads whole: all but the embedding, of which a step reads one row
  // per token.
  std::vector<const cpu::WeightMatrix*> step_matrices() const;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    cpu::WeightMatrix q, k, v, out;
    FfnWeights ffn;
  };

  cpu::WeightMatrix MakeMatrix(int64_t rows, int64_t cols, WeightFormat format, uint64_t* state,
                               bool pack = true);

  ModelConfig config_;
  std::vector<std::unique_ptr<uint8_t[]>> storage_;
  cpu::WeightMatrix embed_, output_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  cpu::RopeTable rope_;

  // Scratch reused across calls.
  std::vector<int64_t> row_position_, segment_begin_;
  std::vector<float> h_, a_, q_, k_, v_, o_, last_, wide_, scores_, wide_kv_;
  FfnScratch ffn_scratch_;
  std::vector<cpu::DecodeQuery> decode_queries_;
  cpu::DecodeAttentionScratch decode_scratch_;
};

}  // namespace yoco

#endif  // YOCO_TOOLS_BASELINE_TRANSFORMER_BASELINE_H_
