// The structured-output benchmark behind `yoco bench-structured`: decode steps with a JSON
// Schema constraint against the same steps without, at batch 1 and 32, over the byte
// tokenizer's vocabulary and a synthetic BPE-sized one (the mask walks every token whose bytes
// could continue the text), all measured in one run.
#ifndef YOCO_TOOLS_BENCH_STRUCTURED_BENCH_H_
#define YOCO_TOOLS_BENCH_STRUCTURED_BENCH_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/model_config.h"
#include "tools/bench/spread.h"

namespace yoco {

struct StructuredBenchOptions {
  ModelConfig config;
  std::vector<int> batches = {1, 32};
  int steps = 24;        // timed decode steps per round
  int rounds = 3;        // alternating plain and constrained
  std::string work_dir;  // where the random checkpoint is written
  // A .tiktoken ranks file (cl100k's, as workers take it): measured as a third vocabulary.
  std::string tiktoken_ranks;
  // 0: greedy (the ratio is the mask's own); above: sampled, so the sequences of a batch part
  // and each meets its own new states (and the plain column shows the sampler's cost).
  float temperature = 0.0f;
};

struct StructuredMeasurement {
  std::string vocabulary;  // "bytes", "synthetic-bpe" or "tiktoken"
  std::string constraint;  // "json" (a record schema) or "regex" (a pattern of words)
  int vocabulary_tokens = 0;
  int batch = 0;
  double plain_tokens_per_s = 0, constrained_tokens_per_s = 0;  // medians over the rounds
  Spread cost;  // constrained time over plain time, per round (target: at most 1.5)
};

struct StructuredBenchReport {
  int threads = 0;
  float temperature = 0.0f;
  std::vector<StructuredMeasurement> rows;
  std::string ToJson() const;
  std::string ToTable() const;
};

absl::StatusOr<StructuredBenchReport> RunStructuredBench(const StructuredBenchOptions& options,
                                                         std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_STRUCTURED_BENCH_H_
