// Prefill then ship.
#include "lib/workers/prefill_worker.h"

#include <future>

#include "lib/engine/generation.h"
#include "lib/engine/state_bundle.h"

namespace yoco {

PrefillWorker::PrefillWorker(std::unique_ptr<Backend> backend,
                             std::unique_ptr<UcxTransport> transport)
    : backend_(std::move(backend)), transport_(std::move(transport)) {}

absl::StatusOr<PrefillResult> PrefillWorker::Prefill(const std::vector<int32_t>& prompt,
                                                     const SamplingParams& sampling,
                                                     const std::string& decode_address,
                                                     absl::Duration transfer_timeout) {
  PrefillResult result;
  auto bytes = std::make_shared<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time start = absl::Now();
    absl::StatusOr<Generation> gen =
        Generation::Prefill(*backend_, prompt, sampling, &result.first_token);
    if (!gen.ok()) return gen.status();
    *bytes = SerializeStateBundle(gen->ToBundle(backend_->model().fingerprint()));
    result.prefill_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  }
  result.bundle_bytes = bytes->size();
  result.sender = transport_->id();
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto verdict = done->get_future();
  const absl::Time start = absl::Now();
  result.transfer_id =
      transport_->Send(decode_address, {bytes->data(), bytes->size(), bytes}, transfer_timeout,
                       [done](absl::Status st) { done->set_value(st); });
  const absl::Status st = verdict.get();
  result.transfer_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!st.ok()) return st;
  return result;
}

}  // namespace yoco
