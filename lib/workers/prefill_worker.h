// PrefillWorker: the prefill side of disaggregated serving, without RPC. Prefills a prompt
// (self-decoder over all of it, cross-decoder for its last position), samples the first token,
// and ships the resulting state bundle to a decode worker over UcxTransport.
#ifndef YOCO_LIB_WORKERS_PREFILL_WORKER_H_
#define YOCO_LIB_WORKERS_PREFILL_WORKER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/engine/backend.h"
#include "lib/engine/sampler.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

struct PrefillResult {
  int32_t first_token = -1;
  uint64_t transfer_id = 0;  // the UCX transfer that carried the bundle
  uint64_t sender = 0;       // this worker's transport id (IncomingTransfer::sender)
  uint64_t bundle_bytes = 0;
  double prefill_ms = 0;
  double transfer_ms = 0;
};

class PrefillWorker {
 public:
  // `backend` runs prefills one at a time; `transport` sends (it needs no receive callbacks).
  PrefillWorker(std::unique_ptr<Backend> backend, std::unique_ptr<UcxTransport> transport);

  // Prefills `prompt` and delivers the bundle to the decode worker at `decode_address`. Returns
  // once the decode worker has verified and taken the bundle. INVALID_ARGUMENT for a bad prompt
  // or sampling; UNAVAILABLE / DEADLINE_EXCEEDED / the receiver's refusal from the transfer.
  absl::StatusOr<PrefillResult> Prefill(const std::vector<int32_t>& prompt,
                                        const SamplingParams& sampling,
                                        const std::string& decode_address,
                                        absl::Duration transfer_timeout);

  const Model& model() const { return backend_->model(); }
  UcxTransport& transport() { return *transport_; }

 private:
  std::mutex mu_;  // one prefill at a time on the backend
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<UcxTransport> transport_;
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_PREFILL_WORKER_H_
