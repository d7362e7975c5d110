// Decode worker: bundles are parsed and checked in the transport's verify callback, so a bad
// bundle is refused back to the prefill worker with its reason.
#include "lib/workers/decode_worker.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/cache/cached_prefill.h"
#include "lib/engine/bundle_part.h"
#include "lib/engine/kv_chunk_arena.h"
#include "lib/engine/state_bundle.h"
#include "lib/trace/tracer.h"

namespace yoco {

namespace {

// A traced transfer's receipt (a bundle whose prefill sent its trace context): from its header's
// arrival to the verdict, under the prefill worker's span, so the trace shows the decode side
// of the transfer (wire time, parsing, joining its parts) and why a refused bundle was refused.
void RecordReceipt(const IncomingTransfer& t, const absl::Status& status) {
  if (!t.trace.has_value() || !t.trace->valid()) return;
  Span span =
      GlobalTracer()->StartSpan("yoco.bundle.receive", SpanKind::kConsumer, &*t.trace, t.started);
  span.SetAttribute("yoco.bundle.bytes", t.size)
      .SetAttribute("yoco.transfer_id", t.id)
      .SetStatus(status);
}

// The answer of an asynchronous admission, for the blocking entry points.
class AdmissionAnswer : public std::enable_shared_from_this<AdmissionAnswer> {
 public:
  std::function<void(absl::StatusOr<uint64_t>)> Callback() {
    return [self = shared_from_this()](absl::StatusOr<uint64_t> result) {
      absl::MutexLock lock(&self->mu_);
      self->result_ = std::move(result);
      self->cv_.SignalAll();
    };
  }
  // Waits for the answer, polling `cancelled` meanwhile (this often, so an abandoned call does
  // not hold its thread long) and calling `on_cancel` once when it says so.
  absl::StatusOr<uint64_t> Wait(const std::function<bool()>& cancelled,
                                const std::function<void()>& on_cancel) {
    constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);
    absl::MutexLock lock(&mu_);
    bool cancel_sent = false;
    while (!result_.has_value()) {
      if (!cancel_sent && cancelled && cancelled()) {
        cancel_sent = true;
        mu_.Unlock();
        on_cancel();
        mu_.Lock();
        continue;
      }
      cv_.WaitWithTimeout(&mu_, kCancelPoll);
    }
    return *std::move(result_);
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::optional<absl::StatusOr<uint64_t>> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<DecodeWorker>> DecodeWorker::Create(
    std::unique_ptr<Backend> backend, const DecodeWorkerOptions& options,
    std::unique_ptr<Backend> prefill_backend) {
  if (prefill_backend != nullptr &&
      prefill_backend->model().fingerprint() != backend->model().fingerprint()) {
    return absl::InvalidArgumentError("the prefill backend runs another model");
  }
  std::unique_ptr<DecodeWorker> w(new DecodeWorker());
  w->backend_ = std::move(backend);
  w->prefill_backend_ = std::move(prefill_backend);
  w->local_prefill_max_tokens_ = options.local_prefill_max_tokens;
  w->structured_output_ = options.structured_output;
  if (w->prefill_backend_ != nullptr) {
    w->prefill_jobs_ = std::make_unique<BoundedJobQueue>(
        static_cast<size_t>(std::max(options.max_local_prefills_waiting, 1)));
  }
  w->unclaimed_ttl_ = options.unclaimed_bundle_ttl;
  w->sweep_interval_ = options.unclaimed_sweep_interval;
  w->memory_budget_bytes_ = options.batcher.memory_budget_bytes;
  w->max_sequence_rows_ = DecodeBatcher::MaxSequenceRows(w->backend_->model().config(),
                                                         options.batcher.memory_budget_bytes);
  w->batcher_options_ = options.batcher;
  w->batcher_ = std::make_unique<DecodeBatcher>(*w->backend_, options.batcher);
  w->resident_ = std::make_unique<ResidentKv>(options.resident_kv_budget_bytes);
  DecodeWorker* self = w.get();
  const ModelConfig& config = w->backend_->model().config();
  const uint64_t fingerprint = w->backend_->model().fingerprint();
  ReceiveCallbacks callbacks;
  // verify and on_received run back to back on the transport thread: the bundle parsed by the
  // first is handed to the second.
  callbacks.verify = [self, &config, fingerprint](const IncomingTransfer& t,
                                                  const ByteBuffer& buffer) -> absl::Status {
    self->verified_a_part_ = false;
    absl::string_view data = buffer.view();
    std::string gathered;
    std::optional<absl::StatusOr<BundlePart>> part;
    if (buffer.segmented()) {
      // Only `allocate` below makes segmented buffers: the owner is a landing.
      const auto& landing = *std::static_pointer_cast<BundlePartLanding>(buffer.owner());
      if (landing.HoldsChunkPart()) {
        part = landing.Take(config, fingerprint);
      } else {
        gathered = landing.Gather();  // not a part of this version: read as it was sent
        data = gathered;
      }
    }
    if (!part.has_value() && IsBundlePart(data)) part = ParseBundlePart(data, config, fingerprint);
    if (part.has_value()) {
      if (!part->ok()) return part->status();
      self->verified_a_part_ = true;
      return self->parts_.Put(t.sender, std::move(**part), static_cast<int64_t>(buffer.size()),
                              absl::Now());
    }
    absl::StatusOr<StateBundle> bundle = ParseStateBundle(data, config, fingerprint);
    if (!bundle.ok()) return bundle.status();
    // Rows sent ahead in parts go in front of those carried, then the resident chunks in front
    // of both.
    self->verified_part_bytes_ = 0;
    if (bundle->parts > 0) {
      absl::StatusOr<int64_t> joined = self->parts_.Join(t.sender, &*bundle);
      if (!joined.ok()) return joined.status();
      self->verified_part_bytes_ = *joined;
    }
    // Chunks left out come from those kept here; a chunk let go refuses the bundle (NOT_FOUND)
    // and the sender sends it whole.
    if (absl::Status st = self->resident_->Attach(&*bundle); !st.ok()) return st;
    self->resident_->Keep(*bundle);
    self->verified_ = std::move(*bundle);
    return absl::OkStatus();
  };
  callbacks.on_start = [self](const IncomingTransfer& t) { return self->OnBundleStart(t); };
  // Into memory kept from earlier bundles: fresh memory costs more to touch than to receive.
  w->bundle_buffers_ = std::make_unique<WarmBufferPool>(
      static_cast<size_t>(std::max<int64_t>(options.transfer_buffer_keep_bytes, 0)));
  if (options.prefault) {
    // Buffers of the default part's size (plus its header's huge page), for bundles that come
    // whole (from a prefill worker sending no parts); parts land in K/V chunks.
    w->bundle_buffers_->Prefault(static_cast<size_t>(options.transfer_buffer_keep_bytes),
                                 static_cast<size_t>(kDefaultBundlePartBytes + (2 << 20)));
    // K and V chunks have the same size.
    KvChunkArena::Global().Reserve(
        static_cast<size_t>(KvRows::ChunkBytes(config.kv_dtype, config.kv_dim())),
        static_cast<size_t>(options.resident_kv_budget_bytes));
  }
  callbacks.allocate = [self, &config](uint64_t size) -> absl::StatusOr<ByteBuffer> {
    // A transfer of a part's size lands in the chunks it will be (see BundlePartLanding).
    if (std::shared_ptr<BundlePartLanding> landing = BundlePartLanding::ForSize(config, size)) {
      std::vector<ByteBuffer::Segment> segments;
      for (absl::Span<uint8_t> s : landing->segments()) segments.push_back({s.data(), s.size()});
      return ByteBuffer(std::move(segments), std::move(landing));
    }
    WarmBuffer* buffer = self->bundle_buffers_->Take(size).release();
    return ByteBuffer(buffer->data(), size, [buffer](uint8_t*) { delete buffer; });
  };
  callbacks.on_received = [self](const IncomingTransfer& t, ByteBuffer data) {
    RecordReceipt(t, absl::OkStatus());
    if (self->verified_a_part_) return;  // kept by verify
    self->OnBundle(t, std::move(data));
  };
  callbacks.on_failed = [](const IncomingTransfer& t, const absl::Status& st) {
    RecordReceipt(t, st);
  };
  auto transport = UcxTransport::Create(options.transport, callbacks);
  if (!transport.ok()) return transport.status();
  w->transport_ = std::move(*transport);
  w->sweeper_ = std::thread([self] { self->SweepLoop(); });
  return w;
}

DecodeWorker::~DecodeWorker() {
  std::map<uint64_t, Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    waiters.swap(waiters_);
    cv_.SignalAll();
  }
  for (auto& [ticket, w] : waiters) w.on_admitted(absl::CancelledError("the worker is stopping"));
  if (sweeper_.joinable()) sweeper_.join();
  prefill_jobs_.reset();  // runs what is queued first
  transport_.reset();     // no more bundles
  batcher_.reset();       // ends every sequence
}

absl::Status DecodeWorker::OnBundleStart(const IncomingTransfer& t) {
  absl::MutexLock lock(&mu_);
  DropUnclaimedLocked(absl::Now());
  const int64_t held = arrived_bytes_ + parts_.bytes();
  if (held + static_cast<int64_t>(t.size) > memory_budget_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("the decode worker holds ", held,
                                                     " bytes of bundles waiting for their Decode "
                                                     "call; ",
                                                     t.size,
                                                     " more would exceed its state-memory budget"));
  }
  return absl::OkStatus();
}

void DecodeWorker::OnBundle(const IncomingTransfer& t, ByteBuffer data) {
  std::optional<Waiter> waiter;
  StateBundle bundle;
  {
    absl::MutexLock lock(&mu_);
    const auto key = std::make_pair(t.sender, t.id);
    if (auto it = arrived_.find(key); it != arrived_.end()) arrived_bytes_ -= it->second.bytes;
    const int64_t bytes = static_cast<int64_t>(data.size()) + verified_part_bytes_;
    arrived_[key] = Arrived{std::move(verified_), bytes, absl::Now()};
    arrived_bytes_ += bytes;
    cv_.SignalAll();
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->second.key == key) {
        waiter = std::move(it->second);
        waiters_.erase(it);
        bundle = TakeArrivedLocked(key);
        break;
      }
    }
  }
  if (waiter.has_value()) {
    waiter->on_admitted(AdmitBundle(std::move(bundle), waiter->call, std::move(waiter->on_event)));
  }
}

StateBundle DecodeWorker::TakeArrivedLocked(const std::pair<uint64_t, uint64_t>& key) {
  auto it = arrived_.find(key);
  StateBundle bundle = std::move(it->second.bundle);
  arrived_bytes_ -= it->second.bytes;
  arrived_.erase(it);
  return bundle;
}

absl::StatusOr<uint64_t> DecodeWorker::AdmitBundle(
    StateBundle bundle, const ShippedDecodeCall& call,
    std::function<void(const DecodeEvent&)> on_event) {
  if (call.sampling.has_value()) {
    if (absl::Status st = call.sampling->Validate(backend_->model().config().vocab_size);
        !st.ok()) {
      return st;
    }
  }
  if (!call.choices.empty()) {
    if (!call.sampling.has_value()) {
      return absl::InvalidArgumentError("a call with choices must carry its sampling");
    }
    return AdmitChoices(std::move(bundle), *call.sampling, call.prompt_ids, call.choices,
                        std::vector<bool>(call.choices.size(), false), call.stop_at_eos,
                        call.scheduling, std::move(on_event));
  }
  absl::StatusOr<Generation> gen = Generation::FromBundle(std::move(bundle));
  if (!gen.ok()) return gen.status();
  if (call.sampling.has_value()) {
    gen->set_sampling(*call.sampling);
    gen->set_history(TokenHistory(call.prompt_ids, call.generated));
    absl::StatusOr<std::unique_ptr<LogitConstraint>> constraint =
        MakeConstraint(structured_output_.get(), *call.sampling, call.generated);
    if (!constraint.ok()) return constraint.status();
    if (*constraint != nullptr) gen->set_constraint(*std::move(constraint));
  }
  return batcher_->Admit({std::move(*gen), call.max_new_tokens, call.stop_at_eos,
                          std::move(on_event), call.scheduling});
}

absl::StatusOr<uint64_t> DecodeWorker::AdmitChoices(
    StateBundle bundle, const SamplingParams& sampling, const std::vector<int32_t>& prompt_ids,
    const std::vector<DecodeChoiceCall>& choices, const std::vector<bool>& drawn_here,
    bool stop_at_eos, const SchedulingClass& scheduling,
    std::function<void(const DecodeEvent&)> on_event) {
  auto shared_on_event =
      std::make_shared<std::function<void(const DecodeEvent&)>>(std::move(on_event));
  std::vector<DecodeSequence> sequences;
  for (size_t i = 0; i < choices.size(); ++i) {
    const DecodeChoiceCall& c = choices[i];
    if (c.sent.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("choice ", c.choice, " has no first token to continue from"));
    }
    // Copies share the state's full K/V chunks; the last takes the bundle itself.
    StateBundle own = i + 1 < choices.size() ? bundle : std::move(bundle);
    own.pending_token = c.sent[0];
    absl::StatusOr<Generation> gen = Generation::FromBundle(std::move(own));
    if (!gen.ok()) return gen.status();
    SamplingParams choice_sampling = sampling;
    choice_sampling.seed = ChoiceSeed(sampling.seed, c.choice);
    gen->set_sampling(std::move(choice_sampling));
    gen->set_history(TokenHistory(prompt_ids, {c.sent.data(), 1}));
    absl::StatusOr<std::unique_ptr<LogitConstraint>> constraint =
        MakeConstraint(structured_output_.get(), sampling, {c.sent.data(), 1});
    if (!constraint.ok()) return constraint.status();
    if (*constraint != nullptr) gen->set_constraint(*std::move(constraint));
    gen->set_replay({c.sent.begin() + 1, c.sent.end()});
    const int counted = drawn_here[i] ? 1 : 0;  // the events count the first when drawn here
    sequences.push_back({std::move(*gen), c.max_new_tokens, stop_at_eos,
                         [shared_on_event, choice = c.choice, counted](DecodeEvent e) {
                           e.choice = choice;
                           e.generated += counted;
                           (*shared_on_event)(e);
                         },
                         scheduling, c.choice});
  }
  return batcher_->AdmitChoices(std::move(sequences));
}

uint64_t DecodeWorker::DecodeWhenArrived(
    const ShippedDecodeCall& call, std::function<void(const DecodeEvent&)> on_event,
    std::function<void(absl::StatusOr<uint64_t>)> on_admitted) {
  const auto key = std::make_pair(call.sender, call.transfer_id);
  StateBundle bundle;
  {
    absl::MutexLock lock(&mu_);
    if (arrived_.count(key) == 0) {
      if (stopping_) {
        on_admitted(absl::UnavailableError("the worker is stopping"));
        return 0;
      }
      const uint64_t ticket = next_ticket_++;
      waiters_.emplace(ticket, Waiter{key, call, absl::Now() + call.wait, std::move(on_event),
                                      std::move(on_admitted)});
      cv_.SignalAll();  // the sweeper may need to wake sooner
      return ticket;
    }
    bundle = TakeArrivedLocked(key);
  }
  on_admitted(AdmitBundle(std::move(bundle), call, std::move(on_event)));
  return 0;
}

void DecodeWorker::CancelWaiting(uint64_t ticket) {
  std::optional<Waiter> waiter;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(ticket);
    if (it == waiters_.end()) return;
    waiter = std::move(it->second);
    waiters_.erase(it);
  }
  waiter->on_admitted(absl::CancelledError("the Decode call was cancelled"));
}

void DecodeWorker::DropUnclaimedLocked(absl::Time now) {
  // Parts come as a prefill produces them, so a bundle's parts are kept while the next keeps
  // coming within the TTL (a long CPU prefill sends one every several seconds).
  parts_.DropArrivedBefore(now - unclaimed_ttl_);
  for (auto it = arrived_.begin(); it != arrived_.end();) {
    if (now - it->second.arrival > unclaimed_ttl_) {
      arrived_bytes_ -= it->second.bytes;
      it = arrived_.erase(it);
    } else {
      ++it;
    }
  }
}

// Without it an unclaimed bundle would stay until the next one arrived, and a Decode call
// whose bundle never comes would wait for ever. Wakes at the interval or at the earliest
// waiter's deadline.
void DecodeWorker::SweepLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time wake = absl::Now() + sweep_interval_;
    for (const auto& [ticket, w] : waiters_) wake = std::min(wake, w.deadline);
    cv_.WaitWithDeadline(&mu_, wake);
    const absl::Time now = absl::Now();
    DropUnclaimedLocked(now);
    std::vector<Waiter> expired;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    if (expired.empty()) continue;
    mu_.Unlock();
    for (Waiter& w : expired) {
      w.on_admitted(absl::DeadlineExceededError("the state bundle did not arrive in time"));
    }
    mu_.Lock();
  }
}

size_t DecodeWorker::waiting_bundles() const {
  absl::MutexLock lock(&mu_);
  return arrived_.size();
}

int64_t DecodeWorker::waiting_bundle_bytes() const {
  absl::MutexLock lock(&mu_);
  return arrived_bytes_ + parts_.bytes();
}

bool DecodeWorker::CanAdmit() const {
  const DecodeBatcherStats s = batcher_->stats();
  if (s.active >= batcher_options_.max_batch && s.queued >= batcher_options_.max_queue) {
    return false;
  }
  const int64_t typical = s.active > 0 ? s.memory_in_use_bytes / s.active : 0;
  const int64_t free_bytes = memory_budget_bytes_ - s.memory_in_use_bytes - waiting_bundle_bytes();
  return free_bytes > 0 && free_bytes >= typical;
}

absl::StatusOr<uint64_t> DecodeWorker::Decode(const ShippedDecodeCall& call,
                                              std::function<void(const DecodeEvent&)> on_event,
                                              const std::function<bool()>& cancelled) {
  auto answer = std::make_shared<AdmissionAnswer>();
  const uint64_t ticket = DecodeWhenArrived(call, std::move(on_event), answer->Callback());
  return answer->Wait(cancelled, [&] { CancelWaiting(ticket); });
}

absl::Status DecodeWorker::CheckLocalPrefill(const LocalPrefillCall& call) const {
  if (call.choices.empty() && call.max_new_tokens < 1) {
    return absl::InvalidArgumentError("max_new_tokens must be >= 1");
  }
  if (absl::Status st = CheckPrompt(prefill_backend_->model().config(), call.prompt); !st.ok()) {
    return st;
  }
  if (call.prompt.size() > static_cast<size_t>(std::max(local_prefill_max_tokens_, 0))) {
    return absl::FailedPreconditionError(
        absl::StrCat("this decode worker prefills prompts of at most ", local_prefill_max_tokens_,
                     " tokens; this one has ", call.prompt.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DecodeWorker::PrefillAndDecode(
    const LocalPrefillCall& call, std::function<void(const DecodeEvent&)> on_event,
    const std::function<bool()>& cancelled) {
  auto answer = std::make_shared<AdmissionAnswer>();
  PrefillAndDecodeAsync(call, std::move(on_event), cancelled, answer->Callback());
  return answer->Wait(nullptr, nullptr);  // `cancelled` goes with the job
}

absl::StatusOr<uint64_t> DecodeWorker::RunLocalPrefill(
    const LocalPrefillCall& call, std::function<void(const DecodeEvent&)> on_event,
    const std::function<bool()>& cancelled) {
  if (cancelled && cancelled()) return absl::CancelledError("the Decode call was cancelled");
  // A prefill worker's path without a cache: the same segments on the cache's block grid, so
  // the same bits as a prefill there (floating-point sums depend on where segments start).
  CachedPrefillRequest request;
  request.prompt = call.prompt;
  request.sampling = call.sampling;
  request.cancelled = cancelled;
  request.generated_tail = call.generated_tail;
  absl::StatusOr<std::unique_ptr<LogitConstraint>> constraint =
      MakeConstraint(structured_output_.get(), call.sampling);
  if (!constraint.ok()) return constraint.status();
  request.constraint = constraint->get();
  absl::StatusOr<CachedPrefillResult> prefill = CachedPrefill(*prefill_backend_, nullptr, request);
  if (!prefill.ok()) return prefill.status();
  local_prefills_.fetch_add(1);
  if (!call.choices.empty()) return AdmitLocalChoices(call, *std::move(prefill), on_event);
  const int32_t first = prefill->first_token;
  DecodeEvent event;
  event.token = first;
  event.logprobs = prefill->generation.pending_logprobs();
  event.generated = 1;
  on_event(event);
  // The same ends as a prefill worker's first token (PrefillWorker: EndsOnFirstToken).
  DecodeEvent finish;
  finish.finished = true;
  finish.generated = 1;
  finish.reason = FinishFor(StopAfter(call.sampling, call.stop_at_eos, first));
  if (finish.reason == DecodeFinish::kLength && call.max_new_tokens > 1) {
    // The batch counts the tokens it produces; the caller's count includes the first.
    auto counted = [on_event = std::move(on_event)](DecodeEvent e) {
      e.generated += 1;
      on_event(e);
    };
    return batcher_->Admit({std::move(prefill->generation), call.max_new_tokens - 1,
                            call.stop_at_eos, std::move(counted), call.scheduling});
  }
  on_event(finish);
  return 0;
}

absl::StatusOr<uint64_t> DecodeWorker::AdmitLocalChoices(
    const LocalPrefillCall& call, CachedPrefillResult prefill,
    const std::function<void(const DecodeEvent&)>& on_event) {
  // Draws the first token of the choices that have none yet and sends it; a choice it ends
  // (as a prefill worker's first token would: EndsOnFirstToken) is over.
  std::vector<uint32_t> to_draw;
  for (const DecodeChoiceCall& c : call.choices) {
    if (c.sent.empty()) to_draw.push_back(c.choice);
  }
  const std::vector<ChoiceDraw> draws = prefill.generation.DrawChoices(to_draw);
  std::vector<DecodeChoiceCall> going;
  std::vector<bool> drawn_here;
  size_t next_draw = 0;
  for (const DecodeChoiceCall& c : call.choices) {
    DecodeChoiceCall next = c;
    if (c.sent.empty()) {
      const ChoiceDraw& draw = draws[next_draw++];
      DecodeEvent event;
      event.token = draw.token;
      event.logprobs = draw.logprobs;
      event.generated = 1;
      event.choice = c.choice;
      on_event(event);
      DecodeEvent finish;
      finish.finished = true;
      finish.generated = 1;
      finish.choice = c.choice;
      finish.reason = FinishFor(StopAfter(call.sampling, call.stop_at_eos, draw.token));
      if (finish.reason != DecodeFinish::kLength || c.max_new_tokens <= 1) {
        on_event(finish);
        continue;
      }
      next.sent = {draw.token};
      next.max_new_tokens = c.max_new_tokens - 1;
    }
    drawn_here.push_back(c.sent.empty());
    going.push_back(std::move(next));
  }
  if (going.empty()) return 0;
  const uint64_t fingerprint = prefill_backend_->model().fingerprint();
  const std::vector<int32_t> prompt_ids = call.sampling.AdjustsLogits()
                                              ? TokenHistory(call.prompt, {}).prompt_ids()
                                              : std::vector<int32_t>();
  return AdmitChoices(prefill.generation.ToBundle(fingerprint), call.sampling, prompt_ids, going,
                      drawn_here, call.stop_at_eos, call.scheduling, on_event);
}

void DecodeWorker::PrefillAndDecodeAsync(
    LocalPrefillCall call, std::function<void(const DecodeEvent&)> on_event,
    std::function<bool()> cancelled, std::function<void(absl::StatusOr<uint64_t>)> on_admitted) {
  if (prefill_backend_ == nullptr) {
    on_admitted(absl::FailedPreconditionError("this decode worker does not prefill"));
    return;
  }
  if (absl::Status st = CheckLocalPrefill(call); !st.ok()) {
    on_admitted(st);
    return;
  }
  // Shared by the job and the refusal below: exactly one of them calls it.
  auto admitted =
      std::make_shared<std::function<void(absl::StatusOr<uint64_t>)>>(std::move(on_admitted));
  const SchedulingClass scheduling = call.scheduling;
  const bool posted = prefill_jobs_->Post(
      [this, call = std::move(call), on_event = std::move(on_event),
       cancelled = std::move(cancelled),
       admitted]() mutable { (*admitted)(RunLocalPrefill(call, std::move(on_event), cancelled)); },
      scheduling);
  if (!posted) (*admitted)(absl::ResourceExhaustedError("too many local prefills are waiting"));
}

}  // namespace yoco
