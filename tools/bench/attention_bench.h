// The decode-attention benchmark behind `yoco bench-attention`: the cross decoder's attention
// over the shared K/V alone (every cross layer, its own K/V per layer and sequence), with K and
// V in rows and in the engine's layout ("lanes": keys in lanes, values in strips), against a
// plain read of the same bytes in the same process.
// A decode step's attention can go no faster than reading its K/V once, so the fraction of that
// read's rate is the kernel's figure of merit; the machine's probe bandwidth is printed beside it
// because a plain read of many mid-sized buffers runs slower than the probe's one large buffer.
// Questions on one document (queries sharing its K/V chunks) are measured against one question
// alone: the step's speedup from batching them, and their GFLOP/s against the machine's sgemm.
#ifndef YOCO_TOOLS_BENCH_ATTENTION_BENCH_H_
#define YOCO_TOOLS_BENCH_ATTENTION_BENCH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/model_config.h"
#include "tools/bench/spread.h"

namespace yoco {

struct AttentionBenchShape {
  int batch = 1;        // sequences per call
  int64_t context = 0;  // keys per sequence
};

struct AttentionBenchOptions {
  ModelConfig config;  // heads, head dim, cross layers and K/V dtype
  std::vector<AttentionBenchShape> shapes = {{1, 32768}, {32, 2048}};
  // batch questions on one document of context keys, all reading its chunks.
  std::vector<AttentionBenchShape> shared = {{32, 16384}};
  // Rounds per shape; each times the plain read, the rows and the lanes layout once (in an
  // order that rotates with the round), so all three see the same machine.
  int rounds = 5;
};

struct AttentionMeasurement {
  AttentionBenchShape shape;
  int layers = 0;
  int64_t bytes = 0;  // K/V bytes one call over every layer reads
  Spread read_ms, rows_ms, lanes_ms;
  Spread lanes_over_read;  // per round: the plain read's time / the lanes layout's time
  Spread rows_over_lanes;  // per round: the rows layout's time / the lanes layout's time
  // Largest |out_lanes - out_rows| over every output, relative to the largest |out|: the two
  // layouts sum the scores in different orders, so they agree to rounding, not to the bit.
  double lanes_rows_difference = 0;
};

// batch queries over one document's K/V (keys in lanes, values in strips, chunks shared) against
// one of them alone, alternated round by round.
struct SharedAttentionMeasurement {
  AttentionBenchShape shape;
  int layers = 0;
  Spread alone_ms, shared_ms;
  Spread speedup;  // per round: batch × alone / shared, the step's tokens/s over batch 1's
  Spread gflops;   // per round: the shared call's multiply-adds × 2 / its time
};

struct AttentionBenchReport {
  int threads = 0;
  std::string kv_dtype;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  double membw_gbs = 0;     // the probe's read bandwidth (one large buffer), measured first
  double sgemm_gflops = 0;  // the probe's sgemm rate, measured when there are shared shapes
  std::vector<AttentionMeasurement> rows;
  std::vector<SharedAttentionMeasurement> shared;
  std::string ToJson() const;
  std::string ToTable() const;
};

// Fails with INTERNAL when the two layouts disagree by more than rounding, or when a shared
// query's output is not the bits it has alone.
absl::StatusOr<AttentionBenchReport> RunAttentionBench(const AttentionBenchOptions& options,
                                                       std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_ATTENTION_BENCH_H_
