// Prefill (through the prefix cache when there is one), then ship.
#include "lib/workers/prefill_worker.h"

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/cache/block_key.h"
#include "lib/cache/snapshot_file.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/generation.h"
#include "lib/engine/prompt_scoring.h"
#include "lib/engine/state_bundle.h"
#include "lib/threading/turn_hand_over.h"

namespace yoco {

absl::StatusOr<std::unique_ptr<PrefillWorker>> PrefillWorker::Create(
    std::unique_ptr<Backend> backend, const UcxTransportOptions& transport,
    const PrefillWorkerOptions& options) {
  std::unique_ptr<PrefillWorker> w(new PrefillWorker(options));
  w->backend_ = std::move(backend);
  const ModelConfig& config = w->backend_->model().config();
  const uint64_t fingerprint = w->backend_->model().fingerprint();
  if (options.cache_budget_bytes > 0) {
    std::unique_ptr<SnapshotDiskTier> disk;
    if (!options.cache_dir.empty()) {
      auto opened = SnapshotDiskTier::Open(
          {options.cache_dir, options.cache_disk_budget_bytes, options.cache_key}, config,
          fingerprint, &w->discarded_);
      if (!opened.ok()) return opened.status();
      disk = std::move(*opened);
    }
    SnapshotStoreOptions store;
    store.budget_bytes = options.cache_budget_bytes;
    w->cache_ = std::make_unique<SnapshotStore>(config, store, std::move(disk));
    w->cache_->ReportDiscarded(w->discarded_);
    w->imports_ = std::make_unique<BoundedJobQueue>(4);
  }
  if (options.prefault) {
    // Long bundles go as parts: buffers of a part's size, several in flight.
    w->bundle_buffers_.Prefault(
        static_cast<size_t>(options.transfer_buffer_keep_bytes),
        options.bundle_part_bytes > 0 ? BundlePartBytes(w->model().config(), w->RowsPerPart()) : 0);
  }
  // Incoming transfers are snapshot copies from other prefill workers: checked (checksum, cache
  // key, version, model) before they are acknowledged, then kept.
  PrefillWorker* self = w.get();
  ReceiveCallbacks callbacks;
  callbacks.verify = [self, &config, fingerprint](const IncomingTransfer&,
                                                  const ByteBuffer& data) -> absl::Status {
    if (self->cache_ == nullptr) {
      return absl::FailedPreconditionError("this prefill worker runs without a prefix cache");
    }
    absl::StatusOr<SnapshotFile> file =
        ParseSnapshotFile(data.view(), config, fingerprint, self->options_.cache_key);
    if (!file.ok()) return file.status();
    self->received_ = std::move(*file);
    return absl::OkStatus();
  };
  callbacks.on_received = [self](const IncomingTransfer&, ByteBuffer) {
    auto file = std::make_shared<SnapshotFile>(std::move(self->received_));
    self->received_ = SnapshotFile();
    // Best effort, like every snapshot: a full queue drops the copy.
    self->imports_->Post([self, file] { self->cache_->Import(*file).IgnoreError(); });
  };
  auto t = UcxTransport::Create(transport, callbacks);
  if (!t.ok()) return t.status();
  w->transport_ = std::move(*t);
  return w;
}

SnapshotPolicy PrefillWorker::Policy() const {
  SnapshotPolicy policy;
  policy.enabled = cache_ != nullptr;
  policy.every_blocks = options_.snapshot_every_blocks;
  return policy;
}

namespace {

// A prefill with this many tokens or fewer left finishes before another tenant of its priority
// gets the engine (TurnHandOver): a short prompt runs whole, a long document shares the engine
// block by block.
constexpr int64_t kFinishWithinTokens = 4 * kCacheBlockTokens;

// A bundle nobody will decode would wait on the decode worker until it expired.
bool EndsOnFirstToken(const PrefillCall& call, int32_t first_token) {
  return call.max_new_tokens == 1 ||
         StopAfter(call.sampling, call.stop_at_eos, first_token) != TokenStop::kNone;
}

// The same for a call with choices: every choice ends on its first token.
bool EveryChoiceEnds(const PrefillCall& call, const std::vector<ChoiceDraw>& draws) {
  return std::all_of(draws.begin(), draws.end(),
                     [&call](const ChoiceDraw& d) { return EndsOnFirstToken(call, d.token); });
}

}  // namespace

absl::StatusOr<PrefillResult> PrefillWorker::Prefill(const PrefillCall& call) {
  // Refused before waiting for the engine (and before any prefill work).
  if (absl::Status st = CheckPrompt(backend_->model().config(), call.prompt); !st.ok()) return st;
  PrefillResult result;
  StateBundle bundle;
  // The prompt's chunks are known by their block keys before the prefill, and so are those the
  // decode worker holds: a long remainder starts shipping in parts while it is prefilled.
  std::vector<BlockKey> block_keys;
  if (cache_ != nullptr) {
    block_keys = PrefixBlockKeys(backend_->model().fingerprint(), call.cache_salt, call.prompt);
    for (const BlockKey& key : block_keys) bundle.chunk_names.push_back(key.bytes);
  }
  bundle.resident_chunks =
      std::min<int64_t>(std::max(shipped_.LeadingHeld(call.decode_address, bundle.chunk_names),
                                 call.decode_resident_blocks),
                        static_cast<int64_t>(bundle.chunk_names.size()));
  std::unique_ptr<PartSender> parts = MakePartSender(call, bundle.resident_chunks);
  {
    absl::StatusOr<std::unique_ptr<LogitConstraint>> constraint =
        MakeConstraint(options_.structured_output.get(), call.sampling);
    if (!constraint.ok()) return constraint.status();
    TurnQueue::Turn turn = engine_.Acquire(call.cancelled, call.scheduling);
    if (!turn.ok()) return turn.status();
    const absl::Time start = absl::Now();
    CachedPrefillRequest request;
    request.prompt = call.prompt;
    request.sampling = call.sampling;
    request.salt = call.cache_salt;
    request.policy = Policy();
    TurnHandOver hand_over(turn, call.cancelled, call.scheduling, kFinishWithinTokens);
    request.cancelled = hand_over.cancelled();
    request.block_keys = &block_keys;
    request.generated_tail = call.generated_tail;
    request.constraint = constraint->get();
    request.on_block = [&parts, &hand_over, &call](const SequenceState& state) {
      if (parts != nullptr) parts->SendReady(state, state.position);
      hand_over.BetweenBlocks(static_cast<int64_t>(call.prompt.size()) - state.position);
    };
    absl::StatusOr<CachedPrefillResult> prefill = CachedPrefill(*backend_, cache_.get(), request);
    if (!hand_over.status().ok()) return hand_over.status();
    if (!prefill.ok()) return prefill.status();
    result.first_token = prefill->first_token;
    result.first_logprobs = prefill->generation.pending_logprobs();
    result.cached_tokens = prefill->cached_tokens;
    result.cache_tier = prefill->tier;
    result.cache_miss = prefill->miss;
    result.prefill_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    result.early_parts = parts != nullptr ? parts->parts() : 0;
    // (Parts already sent expire on the decode worker.)
    if (call.choices.empty()) {
      if (EndsOnFirstToken(call, result.first_token)) return result;
    } else {
      result.choice_first = prefill->generation.DrawChoices(call.choices);
      if (EveryChoiceEnds(call, result.choice_first)) return result;
    }
    // The state shares its K/V chunks with the generation (and the cache): no copy.
    StateBundle prefilled = prefill->generation.ToBundle(backend_->model().fingerprint());
    prefilled.chunk_names = std::move(bundle.chunk_names);
    prefilled.resident_chunks = bundle.resident_chunks;
    bundle = std::move(prefilled);
  }
  if (call.on_first_token) call.on_first_token(result);
  if (absl::Status st = ShipBundle(call, parts.get(), bundle, &result); !st.ok()) {
    absl::Status blamed = st;
    blamed.SetPayload(kDecodePeerFailedPayload, absl::Cord());
    return blamed;
  }
  shipped_.Record(call.decode_address, bundle.chunk_names);
  result.shipped = true;
  return result;
}

std::unique_ptr<PartSender> PrefillWorker::MakePartSender(const PrefillCall& call,
                                                          int64_t resident_chunks) {
  const int64_t C = KvRows::kChunkRows;
  const int64_t first_row = resident_chunks * C;
  const int64_t rows = static_cast<int64_t>(call.prompt.size()) - first_row;
  if (options_.bundle_part_bytes <= 0 || rows * KvRowBytes() <= options_.bundle_part_bytes) {
    return nullptr;
  }
  {
    absl::MutexLock lock(&no_parts_mu_);
    if (no_parts_peers_.count(call.decode_address) > 0) return nullptr;
  }
  PartSenderOptions options;
  options.decode_address = call.decode_address;
  options.timeout = call.transfer_timeout;
  options.parts_id = next_parts_id_.fetch_add(1);
  options.fingerprint = backend_->model().fingerprint();
  options.first_row = first_row;
  options.rows_per_part = RowsPerPart();
  return std::make_unique<PartSender>(backend_->model().config(), *transport_, bundle_buffers_,
                                      options);
}

absl::Status PrefillWorker::ShipBundle(const PrefillCall& call, PartSender* parts,
                                       StateBundle& bundle, PrefillResult* result) {
  const absl::Time start = absl::Now();
  uint64_t bytes_sent = 0;
  if (parts != nullptr) {
    // Whole chunks go in parts; the bundle carries the last partial one.
    const int64_t C = KvRows::kChunkRows;
    parts->SendRest(bundle.state, bundle.state.position / C * C);
    if (absl::Status st = parts->Finish(); st.ok()) {
      bundle.parts_id = parts->parts_id();
      bundle.parts = parts->parts();
      bundle.part_rows = parts->part_rows();
      bytes_sent = parts->bytes();
    } else if (st.code() == absl::StatusCode::kInvalidArgument ||
               st.code() == absl::StatusCode::kFailedPrecondition) {
      // A decode worker of an older version reads a part as a bundle and refuses it.
      absl::MutexLock lock(&no_parts_mu_);
      no_parts_peers_.insert(call.decode_address);
    }
  }
  // Into memory kept from earlier bundles: fresh memory costs more to touch than to send.
  auto send = [&] {
    std::shared_ptr<WarmBuffer> bytes = bundle_buffers_.Take(SerializedStateBundleBytes(bundle));
    SerializeStateBundleTo(bundle, bytes->data());
    bytes_sent += bytes->size();
    return SendAndWait(call.decode_address, {bytes->data(), bytes->size(), bytes},
                       call.transfer_timeout, &result->transfer_id, call.transfer_trace);
  };
  absl::Status st = send();
  if (st.code() == absl::StatusCode::kNotFound &&
      (bundle.resident_chunks > 0 || bundle.parts > 0)) {
    // The decode worker let chunks go since they were sent, or lacks a part: send it whole.
    shipped_.Forget(call.decode_address);
    bundle.resident_chunks = 0;
    bundle.parts = 0;
    bundle.part_rows = 0;
    bytes_sent = 0;  // what the decode worker took
    st = send();
  }
  result->transfer_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  result->bundle_bytes = bytes_sent;
  result->bundle_parts = bundle.parts;
  result->resident_chunks = bundle.resident_chunks;
  result->sender = transport_->id();
  return st;
}

int64_t PrefillWorker::KvRowBytes() const {
  const ModelConfig& config = backend_->model().config();
  return 2 * config.kv_dim() * KvDtypeBytes(config.kv_dtype);  // K and V
}

int64_t PrefillWorker::RowsPerPart() const {
  const int64_t C = KvRows::kChunkRows;
  return std::max(C, options_.bundle_part_bytes / KvRowBytes() / C * C);
}

absl::Status PrefillWorker::SendAndWait(const std::string& address, SendBuffer buffer,
                                        absl::Duration timeout, uint64_t* transfer_id,
                                        std::optional<TraceContext> trace) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto verdict = done->get_future();
  *transfer_id = transport_->Send(
      address, std::move(buffer), timeout, [done](absl::Status st) { done->set_value(st); },
      std::move(trace));
  return verdict.get();
}

absl::StatusOr<SnapshotCopyResult> PrefillWorker::CopySnapshot(const BlockKey& key,
                                                               const std::string& target_address,
                                                               absl::Duration timeout) {
  if (cache_ == nullptr) {
    return absl::FailedPreconditionError("this prefill worker runs without a prefix cache");
  }
  absl::StatusOr<SnapshotFile> file = cache_->Export(key);
  if (!file.ok()) return file.status();
  auto bytes = std::make_shared<std::string>(
      SerializeSnapshotFile(*file, backend_->model().fingerprint(), options_.cache_key));
  const absl::Time start = absl::Now();
  uint64_t transfer_id = 0;
  const absl::Status st =
      SendAndWait(target_address, {bytes->data(), bytes->size(), bytes}, timeout, &transfer_id);
  if (!st.ok()) return st;
  return SnapshotCopyResult{bytes->size(), absl::ToDoubleMilliseconds(absl::Now() - start)};
}

absl::StatusOr<std::vector<TokenLogprobs>> PrefillWorker::Score(
    const std::vector<int32_t>& tokens, int top_logprobs, const std::function<bool()>& cancelled,
    const SchedulingClass& scheduling) {
  if (absl::Status st = CheckPrompt(backend_->model().config(), tokens); !st.ok()) return st;
  TurnQueue::Turn turn = engine_.Acquire(cancelled, scheduling);
  if (!turn.ok()) return turn.status();
  ScoreOptions options;
  options.top_logprobs = top_logprobs;
  options.cancelled = cancelled;
  return ScorePrompt(*backend_, tokens, options);
}

absl::StatusOr<PrecacheResult> PrefillWorker::Precache(
    const std::vector<int32_t>& document, const std::string& cache_salt,
    const SnapshotRetention& retention, const std::function<bool()>& cancelled,
    const std::function<void(int64_t tokens_done)>& progress, const SchedulingClass& scheduling) {
  if (cache_ == nullptr) {
    return absl::FailedPreconditionError("this prefill worker runs without a prefix cache");
  }
  if (static_cast<int64_t>(document.size()) < kCacheBlockTokens) {
    return absl::InvalidArgumentError(absl::StrCat("a document needs at least ", kCacheBlockTokens,
                                                   " tokens to be cached; it has ",
                                                   document.size()));
  }
  if (absl::Status st = CheckPrompt(backend_->model().config(), document); !st.ok()) return st;
  TurnQueue::Turn turn = engine_.Acquire(cancelled, scheduling);
  if (!turn.ok()) return turn.status();
  CachedPrefillRequest request;
  request.prompt = document;
  request.salt = cache_salt;
  request.policy = Policy();
  request.policy.last_block_retention = retention;
  TurnHandOver hand_over(turn, cancelled, scheduling, kFinishWithinTokens);
  request.cancelled = hand_over.cancelled();
  request.on_block = [&hand_over, &document](const SequenceState& state) {
    hand_over.BetweenBlocks(static_cast<int64_t>(document.size()) - state.position);
  };
  request.progress = progress;
  absl::StatusOr<CachedPrefillResult> prefill = CachedPrefill(*backend_, cache_.get(), request);
  if (!hand_over.status().ok()) return hand_over.status();
  if (!prefill.ok()) return prefill.status();
  if (!prefill->last_block_snapshot.has_value()) {
    return absl::ResourceExhaustedError(
        "the document's snapshot does not fit the prefix cache next to the pinned snapshots");
  }
  return PrecacheResult{static_cast<int64_t>(document.size()), *prefill->last_block_snapshot};
}

}  // namespace yoco
