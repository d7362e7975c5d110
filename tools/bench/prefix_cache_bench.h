// The prefix-cache benchmark: time to first token for a question asked after a pre-cached
// document (hit) against the same prompt with nothing cached (miss), on one engine in one
// process, and the snapshot's bytes per cached token against a same-shape Transformer's K/V.
// TTFT here is the prefill worker's part (lookup, restore, prefill, first token); shipping the
// bundle to a decode worker costs the same on a hit and a miss and comes on top of both.
#ifndef YOCO_TOOLS_BENCH_PREFIX_CACHE_BENCH_H_
#define YOCO_TOOLS_BENCH_PREFIX_CACHE_BENCH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/engine/model_weights.h"
#include "lib/model/model_config.h"

namespace yoco {

struct PrefixCacheBenchOptions {
  ModelConfig config;
  WeightFormat weights = WeightFormat::kBF16;
  std::vector<int64_t> document_lengths = {2048, 8192};
  int64_t question_tokens = 32;
  std::string work_dir;  // where the random checkpoint is written (the caller removes it)
};

struct PrefixCacheMeasurement {
  int64_t document = 0;  // tokens
  int64_t cached = 0;    // tokens the hit restored
  double miss_ttft_ms = 0, hit_ttft_ms = 0;
  double snapshot_bytes_per_token = 0;     // the document's snapshot / its cached tokens
  double transformer_bytes_per_token = 0;  // K/V of every layer, f32, as the baseline keeps it
};

struct PrefixCacheBenchReport {
  int threads = 0;
  std::vector<PrefixCacheMeasurement> rows;
  std::string ToJson() const;
  std::string ToTable() const;
};

absl::StatusOr<PrefixCacheBenchReport> RunPrefixCacheBench(const PrefixCacheBenchOptions& options,
                                                           std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_PREFIX_CACHE_BENCH_H_
