// Workload: the requests a load test sends, generated from a seed. Request i is a pure function
// of (seed, i), so a run is reproducible whatever order its requests complete in, and two runs
// (say, against two servers) send the same prompts. Prompts are token ids drawn from the model's
// vocabulary (past the four specials), BOS first, so that lengths are exact for any tokenizer.
#ifndef YOCO_LOADTEST_WORKLOAD_H_
#define YOCO_LOADTEST_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

enum class WorkloadKind {
  kRag,           // documents with a Zipf popularity, a question appended to one
  kSharedPrefix,  // one shared system prompt + a varied suffix
  kRandom,        // prompts of random length
};

absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name);
const char* WorkloadKindName(WorkloadKind kind);

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kRag;
  uint64_t seed = 0;
  int32_t vocab_size = 512;
  int output_tokens = 64;  // max_tokens of every request
  // rag
  int documents = 8;
  int document_tokens = 1024;
  int question_tokens = 32;
  double zipf_exponent = 1.0;  // popularity of document k (from 1) ~ 1 / k^s
  // The fraction of requests about a document never seen before (always a miss).
  double unseen_fraction = 0.0;
  // shared-prefix
  int prefix_tokens = 512;
  int suffix_tokens = 64;
  // random: prompt lengths uniform in [input_tokens - spread, input_tokens + spread]
  int input_tokens = 256;
  int input_spread = 0;
};

struct PlannedRequest {
  std::vector<int32_t> prompt;
  uint32_t max_tokens = 0;
  int document = -1;  // rag: the document asked about; -1 for an unseen one and other workloads
};

class Workload {
 public:
  // INVALID_ARGUMENT naming the option for sizes that make no sense.
  static absl::StatusOr<Workload> Make(const WorkloadOptions& options);

  // Request `index` of the run.
  PlannedRequest Request(uint64_t index) const;
  // rag: the documents (BOS first), what a run pre-caches; empty for other workloads.
  const std::vector<std::vector<int32_t>>& documents() const { return documents_; }
  const WorkloadOptions& options() const { return options_; }

 private:
  explicit Workload(const WorkloadOptions& options) : options_(options) {}
  const WorkloadOptions options_;
  std::vector<std::vector<int32_t>> documents_;
  std::vector<int32_t> shared_prefix_;
  std::vector<double> popularity_cdf_;  // rag: cumulative Zipf weights, normalised
};

// SplitMix64: a small, portable generator (std's distributions differ between libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();            // [0, 1)
  uint64_t Below(uint64_t n);  // [0, n)
 private:
  uint64_t state_;
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_WORKLOAD_H_
