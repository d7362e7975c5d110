// The engine benchmark behind `yoco bench`: YOCO against a same-shape Transformer on the same
// kernels, and both against the machine's own sgemm rate and memory bandwidth, all measured in
// one run.
#ifndef YOCO_TOOLS_BENCH_ENGINE_BENCH_H_
#define YOCO_TOOLS_BENCH_ENGINE_BENCH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/engine/model_weights.h"
#include "lib/model/model_config.h"
#include "tools/bench/spread.h"

namespace yoco {

struct EngineBenchOptions {
  ModelConfig config;                          // the shape of both models
  WeightFormat weights = WeightFormat::kBF16;  // how both models hold their matrices
  std::vector<int64_t> prefill_lengths = {512, 2048, 8192};
  std::vector<int> decode_batches = {1, 8, 32};
  int64_t decode_context = 2048;
  int decode_steps = 8;  // timed steps per batch size and round (after one warm-up step)
  // Rounds per batch size, each measuring the read bandwidth, then YOCO's steps, then the
  // Transformer's: the decode figures are the rounds' medians, with their range.
  int decode_rounds = 3;
  std::string work_dir;  // where the random YOCO checkpoint is written (the caller removes it)
};

// The paper's smallest shape: 12 layers, dim 768, 6 self heads, 12 attention heads over 4 KV
// heads, FFN 2048, vocab 32000.
ModelConfig DefaultBenchConfig();

struct PrefillMeasurement {
  int64_t n = 0;
  double yoco_tokens_per_s = 0, transformer_tokens_per_s = 0;
  double yoco_gflops = 0;  // YOCO prefill's own FLOP count / time
};

// Decode tokens/s, floor and bound are the medians over the rounds; the ratios are taken per
// round (against the bandwidth and sgemm rate measured in that round) and reported as their
// median and range.
struct DecodeMeasurement {
  int batch = 0;
  int64_t context = 0;
  int rounds = 0;
  double membw_gbs = 0;     // the rounds' median read bandwidth (the profile's bounds use it)
  double sgemm_gflops = 0;  // the rounds' median sgemm rate (likewise)
  double yoco_tokens_per_s = 0, transformer_tokens_per_s = 0;
  Spread yoco_over_transformer;
  Spread bound_fraction;  // YOCO's tokens/s over the bound
  // YOCO's memory floor: batch / ((weight bytes + batch·state bytes) / membw), where a
  // sequence's state bytes per step are its shared K/V read by every cross layer plus its
  // self-decoder states read and written.
  double floor_tokens_per_s = 0;
  // The batch-aware bound: the weights' products cannot beat the sgemm rate either, so
  // batch / (max(weight bytes / membw, matrix FLOP / sgemm) + batch·state bytes / membw).
  double bound_tokens_per_s = 0;
  // The Transformer's bound by the same rule (its matrices, and every layer's own K/V), its
  // tokens/s over it, and the ratio of the two bounds: the speedup YOCO would show if both models
  // ran at their bounds. As the K/V comes to dominate a step (long contexts, large batches) it
  // approaches n_layers / n_cross_layers from below: each Transformer layer reads its own K/V,
  // each cross layer the one shared K/V, and YOCO also reads its retention states.
  double transformer_bound_tokens_per_s = 0;
  Spread transformer_bound_fraction;
  double yoco_over_transformer_at_bounds = 0;
  // What batch invariance costs (CpuBackendOptions::batch_invariant): YOCO's step time over that
  // of a step whose products may take sgemm past the rows a matrix streams, per round. 1 where
  // every matrix streams the whole batch anyway (bf16 and q8 with AVX-512, up to 256 rows).
  Spread batch_invariance_cost;
  // Where a YOCO step's time goes (ms per step, a separate profiled run: CpuBackendOptions::
  // profile), next to what each kind of work needs at the measured rates: the products at
  // max(weight bytes / membw, FLOP / sgemm), the attention at its K/V bytes / membw.
  double projection_ms = 0, ffn_ms = 0, retention_ms = 0, attention_ms = 0, step_ms = 0;
  double products_bound_ms = 0, attention_bound_ms = 0;
};

struct CacheBytesMeasurement {
  int64_t n = 0;
  int64_t yoco = 0, transformer = 0;  // all decoding state of one sequence after n tokens
};

struct EngineBenchReport {
  double sgemm_gflops = 0, membw_gbs = 0;
  int threads = 0;
  std::string weights;   // bf16, f32 or q8
  std::string kv_dtype;  // how the shared K/V is held
  std::vector<PrefillMeasurement> prefill;
  std::vector<DecodeMeasurement> decode;
  std::vector<CacheBytesMeasurement> cache_bytes;

  std::string ToJson() const;
  std::string ToTable() const;
};

// FLOPs of YOCO prefill over n tokens with logits for the last one, counting what the engine
// executes (the dense c×c score block of each gated-retention chunk included).
double YocoPrefillFlops(const ModelConfig& config, int64_t n);

// Runs everything; progress lines go to `log`.
absl::StatusOr<EngineBenchReport> RunEngineBench(const EngineBenchOptions& options,
                                                 std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_ENGINE_BENCH_H_
