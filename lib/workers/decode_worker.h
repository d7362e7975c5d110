// DecodeWorker: the decode side of disaggregated serving, without RPC. Receives state bundles
// over UcxTransport (checked against this worker's model before they are taken), and runs the
// sequences in a continuously batched loop when their Decode call arrives. Bundles nobody asks
// for are dropped after a while; Decode calls wait a bounded time for their bundle.
#ifndef YOCO_LIB_WORKERS_DECODE_WORKER_H_
#define YOCO_LIB_WORKERS_DECODE_WORKER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/batching/decode_batcher.h"
#include "lib/engine/backend.h"
#include "lib/engine/state_bundle.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

struct DecodeWorkerOptions {
  DecodeBatcherOptions batcher;
  UcxTransportOptions transport;
  absl::Duration unclaimed_bundle_ttl = absl::Seconds(60);
};

class DecodeWorker {
 public:
  static absl::StatusOr<std::unique_ptr<DecodeWorker>> Create(std::unique_ptr<Backend> backend,
                                                              const DecodeWorkerOptions& options);
  ~DecodeWorker();

  // Where prefill workers send bundles.
  const std::string& address() const { return transport_->address(); }

  // Waits up to `wait` for the bundle of transfer (sender, transfer_id), then decodes
  // `max_new_tokens` tokens, streaming them to `on_event` (on the batching thread). Returns the
  // batcher's sequence id for Cancel. DEADLINE_EXCEEDED when the bundle does not come,
  // RESOURCE_EXHAUSTED when the worker is full.
  absl::StatusOr<uint64_t> Decode(uint64_t sender, uint64_t transfer_id, int max_new_tokens,
                                  bool stop_at_eos, absl::Duration wait,
                                  std::function<void(const DecodeEvent&)> on_event);
  void Cancel(uint64_t sequence_id) { batcher_->Cancel(sequence_id); }

  DecodeBatcherStats stats() const { return batcher_->stats(); }
  uint64_t fingerprint() const { return backend_->model().fingerprint(); }
  size_t waiting_bundles() const;
  const TransferMetrics& transfer_metrics() const { return transport_->metrics(); }

 private:
  DecodeWorker() = default;
  void OnBundle(const IncomingTransfer& t, ByteBuffer data);

  std::unique_ptr<Backend> backend_;
  absl::Duration unclaimed_ttl_;
  std::unique_ptr<DecodeBatcher> batcher_;

  struct Arrived {
    StateBundle bundle;
    absl::Time arrival;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<uint64_t, uint64_t>, Arrived> arrived_;  // guarded by mu_
  StateBundle verified_;  // transport thread only: from verify to on_received

  std::unique_ptr<UcxTransport> transport_;  // last: its callbacks use the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_DECODE_WORKER_H_
