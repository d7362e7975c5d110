// Decode worker: bundles are parsed and checked in the transport's verify callback, so a bad
// bundle is refused back to the prefill worker with its reason.
#include "lib/workers/decode_worker.h"

#include "lib/engine/state_bundle.h"

namespace yoco {

absl::StatusOr<std::unique_ptr<DecodeWorker>> DecodeWorker::Create(
    std::unique_ptr<Backend> backend, const DecodeWorkerOptions& options) {
  std::unique_ptr<DecodeWorker> w(new DecodeWorker());
  w->backend_ = std::move(backend);
  w->unclaimed_ttl_ = options.unclaimed_bundle_ttl;
  w->batcher_ = std::make_unique<DecodeBatcher>(*w->backend_, options.batcher);
  DecodeWorker* self = w.get();
  const ModelConfig& config = w->backend_->model().config();
  const uint64_t fingerprint = w->backend_->model().fingerprint();
  ReceiveCallbacks callbacks;
  // verify and on_received run back to back on the transport thread: the bundle parsed by the
  // first is handed to the second.
  callbacks.verify = [self, &config, fingerprint](const IncomingTransfer&, absl::string_view data) {
    absl::StatusOr<StateBundle> bundle = ParseStateBundle(data, config, fingerprint);
    if (!bundle.ok()) return bundle.status();
    self->verified_ = std::move(*bundle);
    return absl::OkStatus();
  };
  callbacks.on_received = [self](const IncomingTransfer& t, ByteBuffer data) {
    self->OnBundle(t, std::move(data));
  };
  auto transport = UcxTransport::Create(options.transport, callbacks);
  if (!transport.ok()) return transport.status();
  w->transport_ = std::move(*transport);
  return w;
}

DecodeWorker::~DecodeWorker() {
  transport_.reset();  // no more bundles
  batcher_.reset();    // ends every sequence
}

void DecodeWorker::OnBundle(const IncomingTransfer& t, ByteBuffer data) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  for (auto it = arrived_.begin(); it != arrived_.end();) {  // drop bundles nobody claimed
    it = now - it->second.arrival > unclaimed_ttl_ ? arrived_.erase(it) : std::next(it);
  }
  arrived_[{t.sender, t.id}] = Arrived{std::move(verified_), now};
  cv_.notify_all();
}

size_t DecodeWorker::waiting_bundles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_.size();
}

absl::StatusOr<uint64_t> DecodeWorker::Decode(uint64_t sender, uint64_t transfer_id,
                                              int max_new_tokens, bool stop_at_eos,
                                              absl::Duration wait,
                                              std::function<void(const DecodeEvent&)> on_event) {
  StateBundle bundle;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto key = std::make_pair(sender, transfer_id);
    if (!cv_.wait_for(lock, absl::ToChronoMilliseconds(wait),
                      [&] { return arrived_.count(key) > 0; })) {
      return absl::DeadlineExceededError("the state bundle did not arrive in time");
    }
    bundle = std::move(arrived_[key].bundle);
    arrived_.erase(key);
  }
  absl::StatusOr<Generation> gen = Generation::FromBundle(std::move(bundle));
  if (!gen.ok()) return gen.status();
  return batcher_->Admit({std::move(*gen), max_new_tokens, stop_at_eos, std::move(on_event)});
}

}  // namespace yoco
