// RequestRecord's derived numbers and JSONL form.
#include "loadtest/request_record.h"

namespace yoco {

double RequestRecord::tpot_ms() const {
  if (output_tokens < 2 || ttft_ms < 0) return -1;
  return (e2e_ms - ttft_ms) / static_cast<double>(output_tokens - 1);
}

nlohmann::json RequestRecord::ToJson() const {
  nlohmann::json j = {
      {"index", index},
      {"document", document},
      {"start_s", start_s},
      {"prompt_tokens", prompt_tokens},
      {"max_tokens", max_tokens},
      {"status", status},
      {"ttft_ms", ttft_ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(ttft_ms)},
      {"tpot_ms", tpot_ms() < 0 ? nlohmann::json(nullptr) : nlohmann::json(tpot_ms())},
      {"e2e_ms", e2e_ms},
      {"itl_ms", itl_ms},
      {"output_tokens", output_tokens},
      {"cached_tokens", cached_tokens},
      {"cache_tier", cache_tier},
      {"finish_reason", finish_reason}};
  if (server_ttft_ms >= 0) {
    j["server"] = {
        {"ttft_ms", server_ttft_ms}, {"prefill_ms", prefill_ms}, {"transfer_ms", transfer_ms}};
  }
  if (!error.empty()) j["error"] = error;
  return j;
}

}  // namespace yoco
