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
#include "lib/random/split_mix64.h"

namespace yoco {

enum class WorkloadKind {
  kRag,           // documents with a Zipf popularity, a question appended to one
  kSharedPrefix,  // one shared system prompt + a varied suffix
  kRandom,        // prompts of random length
  kChat,          // multi-turn sessions: each turn repeats the conversation and its answers
  kReplay,        // requests and their arrival times from a JSONL file
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
  // chat: sessions of `turns` requests; a shared system prompt, then per turn a user message
  // of `user_tokens`; turn t's prompt is turn t-1's prompt + its answer + the new message.
  int turns = 4;
  int system_tokens = 128;
  int user_tokens = 32;
  // replay: one JSON object per line: {"timestamp_ms": T, "prompt_tokens": [ids] or "prompt":
  // TEXT, "max_tokens": N}; T from the run's start.
  std::string replay_path;
};

struct PlannedRequest {
  std::vector<int32_t> prompt;
  std::string text;  // replay: a text prompt instead (tokenised by the router)
  uint32_t max_tokens = 0;
  int document = -1;  // rag: the document asked about; -1 for an unseen one and other workloads
};

class Workload {
 public:
  // INVALID_ARGUMENT naming the option for sizes that make no sense.
  static absl::StatusOr<Workload> Make(const WorkloadOptions& options);

  // Request `index` of the run (chat: the first turn of a session when index % turns() == 0).
  PlannedRequest Request(uint64_t index) const;
  // chat: request `index` (a later turn), which continues `previous` (the last turn's prompt)
  // with `answer` (what the model said) and a new user message.
  PlannedRequest NextTurn(const std::vector<int32_t>& previous, const std::vector<int32_t>& answer,
                          uint64_t index) const;
  // Requests per session: the chat workload's turns, 1 otherwise.
  int turns() const { return options_.kind == WorkloadKind::kChat ? options_.turns : 1; }
  // replay: the file's requests, their count and their arrival times (seconds from the start).
  size_t replay_size() const { return replay_.size(); }
  double ArrivalSeconds(uint64_t index) const { return replay_[index % replay_.size()].at_s; }
  // rag: the documents (BOS first), what a run pre-caches; empty for other workloads.
  const std::vector<std::vector<int32_t>>& documents() const { return documents_; }
  const WorkloadOptions& options() const { return options_; }

 private:
  explicit Workload(const WorkloadOptions& options) : options_(options) {}
  struct Replayed;
  static absl::StatusOr<std::vector<Replayed>> ReadReplay(const WorkloadOptions& options);
  const WorkloadOptions options_;
  std::vector<std::vector<int32_t>> documents_;
  std::vector<int32_t> shared_prefix_;
  std::vector<double> popularity_cdf_;  // rag: cumulative Zipf weights, normalised
  struct Replayed {
    double at_s = 0;
    PlannedRequest request;
  };
  std::vector<Replayed> replay_;  // by arrival time
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_WORKLOAD_H_
