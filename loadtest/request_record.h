// RequestRecord: what one load-test request measured, as the JSONL output has it.
#ifndef YOCO_LOADTEST_REQUEST_RECORD_H_
#define YOCO_LOADTEST_REQUEST_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace yoco {

struct RequestRecord {
  uint64_t index = 0;
  int document = -1;   // rag: the document asked about (-1: unseen, or another workload)
  double start_s = 0;  // sent, seconds after the run started
  uint32_t prompt_tokens = 0;
  uint32_t max_tokens = 0;
  std::string status = "OK";   // the gRPC status code's name
  std::string error;           // its message, when not OK
  double ttft_ms = -1;         // -1: no token arrived
  double e2e_ms = 0;           // sent to the end of the stream
  std::vector<double> itl_ms;  // every gap between two tokens
  uint32_t output_tokens = 0;
  uint32_t cached_tokens = 0;
  std::string cache_tier;     // memory, disk, none
  std::string finish_reason;  // length, stop, eos, cancelled
  // Where the time went, as the router's Finish reports it (gRPC only): its own TTFT, from the
  // request's arrival, and the prefill worker's compute and bundle transfer. -1: not reported.
  double server_ttft_ms = -1;
  double prefill_ms = -1;
  double transfer_ms = -1;

  bool ok() const { return status == "OK"; }
  // Time per output token after the first: (e2e - ttft) / (tokens - 1), as vLLM and
  // inference-perf define it; -1 for fewer than two tokens.
  double tpot_ms() const;
  nlohmann::json ToJson() const;
};

}  // namespace yoco

#endif  // YOCO_LOADTEST_REQUEST_RECORD_H_
