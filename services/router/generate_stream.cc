// The Generate chain. Every step runs on a gRPC callback thread and must not block: worker
// calls are asynchronous, a wait for workers is an alarm, and a token is read from the decode
// worker only after the client took the previous one (the client's pace holds the stream back,
// not a thread).
#include "services/router/generate_stream.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/model/sampling_params.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"

namespace yoco {
namespace {

// How often a request that found no healthy pair looks again (within wait_for_workers).
constexpr auto kWorkerWaitPoll = std::chrono::milliseconds(100);

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Whether the client cancelled or its deadline passed: then a worker's failing status is the
// client's doing and must not mark the worker failed.
bool ClientGone(const grpc::ServerContextBase& context) {
  return context.IsCancelled() || std::chrono::system_clock::now() >= context.deadline();
}

grpc::Status ClientGoneStatus(const grpc::ServerContextBase& context, const grpc::Status& worker) {
  if (std::chrono::system_clock::now() >= context.deadline()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the request's deadline passed (" + worker.error_message() + ")");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
}

std::vector<size_t> Joined(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  std::vector<size_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

GenerateStream::GenerateStream(WorkerPool& pool, grpc::CallbackServerContext* context,
                               const v1::GenerateRequest* request)
    : pool_(pool), metrics_(pool.metrics()), context_(context), request_(request) {
  absl::StatusOr<CallScope> scope =
      pool_.Scope(*context_, !request_->cache_salt().empty(), request_->cache_salt());
  if (!scope.ok()) {
    FinishWith(ToGrpcStatus(scope.status()));
    return;
  }
  scope_ = *std::move(scope);
  if (!scope_.tenant.empty()) metrics_.tenant_requests.Add({{"tenant", scope_.tenant}}).Increment();
  absl::StatusOr<CheckedGenerateRequest> call = CheckGenerateRequest(
      *request_, pool_.config(), pool_.tokenizer(), pool_.options().default_max_new_tokens);
  if (!call.ok()) {
    if (const std::string field = InvalidField(call.status()); !field.empty()) {
      context_->AddTrailingMetadata(kInvalidFieldMetadata, field);
    }
    FinishWith(ToGrpcStatus(call.status()));
    return;
  }
  call_ = *std::move(call);
  text_ = TokenTextStream(call_.stop_strings);
  load_wait_until_ =
      std::min(context_->deadline(), std::chrono::system_clock::now() +
                                         absl::ToChronoMilliseconds(pool_.options().max_load_wait));
  StartAttempt(/*retry=*/false);
}

GenerateStream::~GenerateStream() = default;

template <typename T>
T* GenerateStream::KeepLocked(std::vector<std::unique_ptr<T>>& list, std::unique_ptr<T> item) {
  list.push_back(std::move(item));
  ++ops_;
  return list.back().get();
}

void GenerateStream::BeginOp() {
  absl::MutexLock lock(&mu_);
  ++ops_;
}

void GenerateStream::EndOp() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = --ops_ == 0 && done_;
  }
  if (last) delete this;
}

void GenerateStream::OnDone() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    last = ops_ == 0;
  }
  if (last) delete this;
}

void GenerateStream::OnCancel() {
  // The step in flight ends with CANCELLED and the chain finishes the call. Contexts are never
  // destroyed before this object, so cancelling a finished one is harmless.
  std::vector<grpc::ClientContext*> contexts;
  std::vector<DecodeRelay*> relays;
  std::vector<grpc::Alarm*> alarms;
  uint64_t waiting;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (auto& c : prefill_contexts_) contexts.push_back(c.get());
    for (auto& r : relays_) relays.push_back(r.get());
    for (auto& a : alarms_) alarms.push_back(a.get());
    waiting = waiting_place_;
  }
  for (grpc::ClientContext* c : contexts) c->TryCancel();
  for (DecodeRelay* r : relays) r->Cancel();
  for (grpc::Alarm* a : alarms) a->Cancel();
  // Out of the load queue at once (it would be woken only in its turn); the answer is ours.
  if (waiting != 0 && pool_.load_queue().Remove(waiting)) OnRoom(true);
}

bool GenerateStream::InPhase(Phase expected) {
  if (phase_ == expected) return true;
  std::cerr << "yoco-router: request " << request_->request_id() << ": step for phase "
            << static_cast<int>(expected) << " ran in phase " << static_cast<int>(phase_) << "\n";
  FinishWith(grpc::Status(grpc::StatusCode::INTERNAL, "the router lost track of this request"));
  return false;
}

void GenerateStream::StartAttempt(bool retry) {
  if (retry) {
    ++attempts_;
    metrics_.retries.Increment();
  }
  if (attempts_ >= pool_.options().attempts) {
    FinishWith(last_error_);
    return;
  }
  if (context_->IsCancelled()) {
    FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    return;
  }
  attempt_ = Attempt();
  phase_ = Phase::kChoosing;
  attempt_.input = call_.prompt;
  attempt_.input.insert(attempt_.input.end(), generated_.begin(), generated_.end());
  // A sequence no decode worker's state budget can hold is refused before any work. Its K/V
  // rows: the input plus every token still to come but the last (never fed back).
  const uint64_t input = attempt_.input.size();
  const uint64_t rows = input + call_.max_new_tokens - generated_.size() - 1;
  if (const uint64_t longest = pool_.LongestSequenceRows(); longest > 0 && rows > longest) {
    FinishWith(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("the request needs ", rows, " K/V rows on a decode worker (", input,
                     " prompt tokens + max_new_tokens ", call_.max_new_tokens - generated_.size(),
                     " - 1); the largest decode worker's state budget (--memory-budget-mb) holds ",
                     longest,
                     ": shorten the prompt or max_new_tokens, or give decode workers "
                     "more memory")));
    return;
  }
  attempt_.keys = pool_.UsableKeys(scope_.salt, attempt_.input);
  attempt_.wait_until = std::min(context_->deadline(),
                                 std::chrono::system_clock::now() +
                                     absl::ToChronoMilliseconds(pool_.options().wait_for_workers));
  ChooseWorkers();
}

void GenerateStream::ChooseWorkers() {
  phase_ = Phase::kChoosing;
  PairRequest want;
  want.keys = attempt_.keys;
  want.input_tokens = attempt_.input.size();
  want.skip_prefill = Joined(bad_prefill_, busy_prefill_);
  want.skip_decode = Joined(bad_decode_, busy_decode_);
  want.allow_local = !force_remote_;
  attempt_.pair = pool_.ChoosePair(want);
  const WorkerPair& pair = attempt_.pair;
  if (pair.usable()) {
    attempt_.decode_load = pool_.CountRequest(WorkerRole::kDecode, pair.decode->index);
    if (!pair.local) {
      StartRemotePrefill();
      return;
    }
    if (!cache_reported_) {
      cache_reported_ = true;
      finish_.set_cache_tier("none");
      finish_.set_cache_miss_reason("none");
    }
    finish_.set_local_prefill(true);
    metrics_.local_prefills.Increment();
    v1::DecodeRequest dec;
    dec.set_request_id(request_->request_id());
    dec.mutable_prompt()->Add(attempt_.input.begin(), attempt_.input.end());
    ToProto(call_.sampling, dec.mutable_sampling());
    dec.set_max_new_tokens(call_.max_new_tokens - static_cast<uint32_t>(generated_.size()));
    dec.set_stop_at_eos(call_.stop_at_eos);
    attempt_.prefill_ends_at_first_token = true;
    StartDecode(std::move(dec));
    return;
  }
  if (!busy_prefill_.empty() || !busy_decode_.empty()) {  // refused for load, not failed
    WaitForRoom();
    return;
  }
  if (ClientGone(*context_)) {  // (the choice takes a while when it probes every worker)
    FinishWith(ClientGoneStatus(*context_, last_error_));
    return;
  }
  // Only a request that has not yet lost a worker of its own waits: the others retry on what
  // is healthy or fail.
  if (bad_decode_.empty() && bad_prefill_.empty() &&
      std::chrono::system_clock::now() < attempt_.wait_until) {
    WaitForWorkers();
    return;
  }
  FinishWith(last_error_);
}

void GenerateStream::WaitForWorkers() {
  phase_ = Phase::kWaitingForWorkers;
  bool cancelled;
  grpc::Alarm* alarm;
  {
    absl::MutexLock lock(&mu_);
    alarm = KeepLocked(alarms_, std::make_unique<grpc::Alarm>());
    cancelled = cancelled_;
  }
  if (cancelled) {
    EndOp();  // the alarm is never set
    FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    return;
  }
  alarm->Set(std::chrono::system_clock::now() + kWorkerWaitPoll, [this](bool) {
    if (context_->IsCancelled()) {
      FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    } else if (InPhase(Phase::kWaitingForWorkers)) {
      ChooseWorkers();
    }
    EndOp();
  });
}

void GenerateStream::WaitForRoom() {
  if (context_->IsCancelled()) {
    FinishWith(ClientGoneStatus(*context_, last_error_));
    return;
  }
  if (std::chrono::system_clock::now() >= load_wait_until_) {
    FinishWith(last_error_);  // the workers' refusal
    return;
  }
  phase_ = Phase::kWaitingForRoom;
  BeginOp();  // the queue's: OnRoom ends it
  BeginOp();  // this function's: OnRoom may run on another thread before it returns
  uint64_t first;
  {
    absl::MutexLock lock(&mu_);
    room_answered_ = false;
    first = first_place_;
  }
  absl::StatusOr<uint64_t> place = pool_.load_queue().Push(
      scope_.tenant, [this](bool turn) { OnRoom(turn); }, first);
  if (!place.ok()) {  // never queued: no OnRoom
    FinishWith(ToGrpcStatus(place.status()));
    EndOp();
    EndOp();
    return;
  }
  if (first == 0) metrics_.load_waits.Increment();
  // Cancelled before the place was known here, OnCancel could not take it out: this does.
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    if (first_place_ == 0) first_place_ = *place;
    if (!room_answered_) {
      waiting_place_ = *place;
      cancelled = cancelled_;
    }
  }
  if (cancelled && pool_.load_queue().Remove(*place)) OnRoom(true);
  EndOp();
}

void GenerateStream::OnRoom(bool turn) {
  {
    absl::MutexLock lock(&mu_);
    waiting_place_ = 0;
    room_answered_ = true;
  }
  if (context_->IsCancelled()) {
    FinishWith(ClientGoneStatus(*context_, last_error_));
  } else if (!turn) {
    FinishWith(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "every worker is at its queue bound and the router's wait queue is "
                            "full: this request gave its place to another tenant's; retry later"));
  } else if (InPhase(Phase::kWaitingForRoom)) {
    busy_prefill_.clear();
    busy_decode_.clear();
    ChooseWorkers();
  }
  EndOp();
}

void GenerateStream::StartRemotePrefill() {
  phase_ = Phase::kPrefilling;
  const WorkerChoice& prefill = *attempt_.pair.prefill;
  const WorkerChoice& decode = *attempt_.pair.decode;
  if (prefill.better_holder.has_value()) pool_.CopySnapshotLater(prefill, attempt_.keys);
  // Prefill the prompt plus whatever was already sent; it returns the next token.
  v1::PrefillRequest& req = attempt_.prefill_request;
  req.set_request_id(request_->request_id());
  req.mutable_prompt()->Add(attempt_.input.begin(), attempt_.input.end());
  req.set_cache_salt(scope_.salt);
  ToProto(call_.sampling, req.mutable_sampling());
  req.set_decode_ucx_address(decode.info.ucx_address());
  req.set_transfer_timeout_ms(pool_.options().transfer_timeout_ms);
  req.set_max_new_tokens(call_.max_new_tokens - static_cast<uint32_t>(generated_.size()));
  req.set_stop_at_eos(call_.stop_at_eos);
  req.set_decode_resident_blocks(static_cast<uint32_t>(decode.cached_tokens / kCacheBlockTokens));
  attempt_.prefill_load = pool_.CountRequest(WorkerRole::kPrefill, prefill.index);
  // Propagates the client's deadline and cancellation to the prefill worker.
  grpc::ClientContext* context;
  {
    absl::MutexLock lock(&mu_);
    context =
        KeepLocked(prefill_contexts_, grpc::ClientContext::FromCallbackServerContext(*context_));
    if (cancelled_) context->TryCancel();
  }
  pool_.PrefillStub(prefill.index)
      .async()
      ->Prefill(context, &req, &attempt_.prefill_response, [this, context](grpc::Status status) {
        const auto& trailers = context->GetServerTrailingMetadata();
        const auto blamed = trailers.find(kFailedPeerMetadata);
        OnPrefillDone(status, !status.ok() && blamed != trailers.end() &&
                                  blamed->second == kFailedPeerDecode);
        EndOp();
      });
}

void GenerateStream::OnPrefillDone(const grpc::Status& status, bool decode_blamed) {
  if (!InPhase(Phase::kPrefilling)) return;
  attempt_.prefill_load.reset();
  // A prefill worker's queue has one more place: the next waiter's turn.
  if (pool_.load_queue().waiting() > 0) pool_.load_queue().WakeNext();
  if (!status.ok()) {
    AttemptEnd end;
    end.call = WorkerRole::kPrefill;
    end.code = status.error_code();
    end.client_gone = ClientGone(*context_);
    end.decode_blamed = decode_blamed;
    Fail(end, status);
    return;
  }
  const v1::PrefillResponse& pre = attempt_.prefill_response;
  last_prefill_ = attempt_.pair.prefill->index;
  if (!cache_reported_) {  // the first prefill is the one that saw the client's prompt
    cache_reported_ = true;
    finish_.mutable_usage()->set_cached_prompt_tokens(
        std::min<uint32_t>(pre.cached_tokens(), static_cast<uint32_t>(call_.prompt.size())));
    finish_.set_cache_tier(pre.cache_tier());
    finish_.set_cache_miss_reason(pre.cache_miss_reason());
    // A worker that never held the prompt's snapshot says "none"; the index may know better.
    if (pre.cache_miss_reason() == "none") {
      if (std::optional<ForgottenReason> why = pool_.WhyForgotten(attempt_.keys)) {
        finish_.set_cache_miss_reason(*why == ForgottenReason::kExpired ? "expired" : "evicted");
      }
    }
    if (pre.cached_tokens() > 0) {
      metrics_.cache_hits.Increment();
      metrics_.cached_prompt_tokens.Increment(pre.cached_tokens());
    }
  }
  finish_.mutable_timings()->set_prefill_ms(finish_.timings().prefill_ms() + pre.prefill_ms());
  finish_.mutable_timings()->set_transfer_ms(finish_.timings().transfer_ms() + pre.transfer_ms());
  finish_.set_transfer_bytes(finish_.transfer_bytes() + pre.bundle_bytes());
  if (pre.transfer_id() != 0 && !attempt_.keys.empty()) {
    pool_.NoteHeld(attempt_.pair.decode->index, attempt_.keys.back());
  }
  phase_ = Phase::kDecoding;
  const int32_t first = pre.first_token();
  Emit(first, [this, first] {
    if (std::optional<v1::FinishReason> end = EndsAt(first)) {
      Complete(*end);
    } else {
      ContinueAfterFirstToken();
    }
  });
}

void GenerateStream::ContinueAfterFirstToken() {
  // Transfer ids start at 1: an id of 0 means nothing was shipped (a worker from before
  // bundle_shipped existed always ships).
  const v1::PrefillResponse& shipped = attempt_.prefill_response;
  if (!shipped.bundle_shipped() && shipped.transfer_id() == 0) {
    FinishWith(grpc::Status(grpc::StatusCode::INTERNAL,
                            "the prefill worker shipped no state for a request that continues"));
    return;
  }
  v1::DecodeRequest dec;
  dec.set_request_id(request_->request_id());
  dec.set_sender_transport(shipped.sender_transport());
  dec.set_transfer_id(shipped.transfer_id());
  dec.set_max_new_tokens(call_.max_new_tokens - static_cast<uint32_t>(generated_.size()));
  dec.set_wait_for_bundle_ms(pool_.options().transfer_timeout_ms);
  dec.set_stop_at_eos(call_.stop_at_eos);
  StartDecode(std::move(dec));
}

void GenerateStream::StartDecode(v1::DecodeRequest request) {
  phase_ = Phase::kDecoding;
  attempt_.decode_start = std::chrono::steady_clock::now();
  auto made = std::make_unique<DecodeRelay>(
      std::move(request), [this](const v1::DecodeEvent& event) { OnDecodeEvent(event); },
      [this](const grpc::Status& status) { OnDecodeDone(status); });
  DecodeRelay* relay;
  {
    absl::MutexLock lock(&mu_);
    relay = KeepLocked(relays_, std::move(made));
  }
  const size_t decode_index = attempt_.pair.decode->index;
  // Watched before it starts, so that its end (Unwatch) always comes after.
  attempt_.stall_id = pool_.stall_watch().Watch(decode_index, [this, relay] {
    stalled_ = true;
    relay->Cancel();
  });
  relay->Start(pool_.DecodeStub(decode_index), context_->deadline());
  absl::MutexLock lock(&mu_);
  if (cancelled_) relay->Cancel();
}

void GenerateStream::OnDecodeEvent(const v1::DecodeEvent& event) {
  DecodeRelay* relay;
  {
    absl::MutexLock lock(&mu_);
    relay = relays_.back().get();
  }
  if (event.has_finish()) {
    attempt_.decode_reason = event.finish().reason();
    relay->ReadNext();  // to the end of the stream
    return;
  }
  if (!event.has_token()) {
    relay->ReadNext();
    return;
  }
  pool_.stall_watch().Progress(attempt_.stall_id);
  if (attempt_.prefill_ends_at_first_token) {
    attempt_.prefill_ends_at_first_token = false;
    finish_.mutable_timings()->set_prefill_ms(finish_.timings().prefill_ms() +
                                              MsSince(attempt_.decode_start));
  }
  Emit(event.token().id(), [this, relay] {
    if (text_.stopped()) {  // the decode worker's sequence ends with the call
      attempt_.decode_reason = v1::FINISH_REASON_STOP;
      relay->Abandon();
      return;
    }
    relay->ReadNext();
  });
}

void GenerateStream::OnDecodeDone(const grpc::Status& status) {
  finish_.mutable_timings()->set_decode_ms(finish_.timings().decode_ms() +
                                           MsSince(attempt_.decode_start));
  pool_.stall_watch().Unwatch(attempt_.stall_id);
  // A decode worker has room for one more sequence: the next waiter's turn.
  if (pool_.load_queue().waiting() > 0) pool_.load_queue().WakeNext();
  const bool stalled = stalled_.exchange(false);
  if (phase_ == Phase::kFinished) {  // the client went away while a token was being written
    EndOp();
    return;
  }
  if (InPhase(Phase::kDecoding)) {
    AttemptEnd end;
    end.call = WorkerRole::kDecode;
    end.code = status.error_code();
    end.client_gone = ClientGone(*context_);
    // A worker's CANCELLED is no finish this client asked for (its own cancel ends the call
    // before any reply): like a stream that ended early, another pair continues it.
    end.finished = attempt_.decode_reason != v1::FINISH_REASON_UNSPECIFIED &&
                   attempt_.decode_reason != v1::FINISH_REASON_CANCELLED;
    end.stalled = stalled;
    end.local = attempt_.pair.local;
    Fail(end, status);
  }
  EndOp();
}

void GenerateStream::Fail(const AttemptEnd& end, const grpc::Status& status) {
  const Failover f = DecideFailover(end);
  switch (f.next) {
    case Failover::Next::kComplete:
      Complete(attempt_.decode_reason);
      return;
    case Failover::Next::kEndClientGone:
      FinishWith(ClientGoneStatus(*context_, status));
      return;
    case Failover::Next::kFail:
      FinishWith(status);
      return;
    case Failover::Next::kRetry:
    case Failover::Next::kReplan:
      break;
  }
  if (end.stalled) {
    last_error_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the decode worker stalled");
    metrics_.stalled_streams.Increment();
  } else if (status.ok()) {
    last_error_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode stream ended early");
  } else {
    last_error_ = status;
  }
  const size_t decode = attempt_.pair.decode->index;
  if (f.mark_failed == WorkerRole::kPrefill) {
    pool_.MarkFailed(WorkerRole::kPrefill, attempt_.pair.prefill->index);
    bad_prefill_.push_back(attempt_.pair.prefill->index);
  } else if (f.mark_failed == WorkerRole::kDecode) {
    pool_.MarkFailed(WorkerRole::kDecode, decode);
    bad_decode_.push_back(decode);
  }
  if (f.skip_decode) bad_decode_.push_back(decode);
  if (f.busy_prefill) busy_prefill_.push_back(attempt_.pair.prefill->index);
  if (f.busy_decode) busy_decode_.push_back(decode);
  if (f.force_remote) force_remote_ = true;
  StartAttempt(/*retry=*/f.next == Failover::Next::kRetry);
}

std::optional<v1::FinishReason> GenerateStream::EndsAt(int32_t id) const {
  switch (StopAfter(call_.sampling, call_.stop_at_eos, id)) {
    case TokenStop::kStopToken:
      return v1::FINISH_REASON_STOP;
    case TokenStop::kEos:
      return v1::FINISH_REASON_EOS;
    case TokenStop::kNone:
      break;
  }
  if (text_.stopped()) return v1::FINISH_REASON_STOP;
  if (generated_.size() >= call_.max_new_tokens) return v1::FINISH_REASON_LENGTH;
  return std::nullopt;
}

void GenerateStream::Emit(int32_t id, std::function<void()> then) {
  generated_.push_back(id);
  out_.Clear();
  out_.mutable_token()->set_id(id);
  out_.mutable_token()->set_index(static_cast<uint32_t>(generated_.size() - 1));
  out_.mutable_token()->set_text(text_.Add(pool_.tokenizer().Decode({&id, 1})));
  const auto now = std::chrono::steady_clock::now();
  if (generated_.size() == 1) {
    finish_.mutable_timings()->set_ttft_ms(MsSince(start_));
    metrics_.time_to_first_token.Observe(std::chrono::duration<double>(now - start_).count());
  } else {
    metrics_.inter_token.Observe(std::chrono::duration<double>(now - last_token_time_).count());
  }
  last_token_time_ = now;
  metrics_.generated_tokens.Increment();
  if (scope_.generated_tokens != nullptr) scope_.generated_tokens->Increment();
  after_write_ = std::move(then);
  StartWrite(&out_);
}

void GenerateStream::OnWriteDone(bool ok) {
  std::function<void()> then = std::move(after_write_);
  after_write_ = nullptr;
  if (phase_ == Phase::kFinished) {  // the finish message
    if (ok) {
      then();
    } else {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    }
    return;
  }
  if (!ok) {
    // The client is gone: end the decode call, if any (its completion sees kFinished). No read
    // is outstanding while a token is written.
    FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    DecodeRelay* relay = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (!relays_.empty()) relay = relays_.back().get();
    }
    if (relay != nullptr) relay->Abandon();  // a no-op on an earlier attempt's
    return;
  }
  if (then) then();
}

void GenerateStream::Complete(v1::FinishReason reason) {
  attempt_ = Attempt();  // releases the workers' counts
  phase_ = Phase::kFinished;
  finish_.set_reason(reason);
  finish_.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(call_.prompt.size()));
  finish_.mutable_usage()->set_generated_tokens(static_cast<uint32_t>(generated_.size()));
  if (scope_.prompt_tokens != nullptr) scope_.prompt_tokens->Increment(call_.prompt.size());
  if (pool_.options().snapshot_conversations && last_prefill_.has_value()) {
    std::vector<int32_t> conversation = call_.prompt;
    conversation.insert(conversation.end(), generated_.begin(), generated_.end());
    pool_.SnapshotConversation(*last_prefill_, call_.prompt.size(), std::move(conversation),
                               scope_.salt);
  }
  metrics_.Outcome(grpc::StatusCode::OK).Increment();
  out_.Clear();
  *out_.mutable_finish() = finish_;
  // Written, then finished once written: StartWriteAndFinish's message can be lost on the
  // in-process transport (the HTTP front's) when the client reads it only after the status.
  after_write_ = [this] { Finish(grpc::Status::OK); };
  StartWrite(&out_);
}

void GenerateStream::FinishWith(const grpc::Status& status) {
  if (phase_ == Phase::kFinished) return;
  phase_ = Phase::kFinished;
  attempt_.decode_load.reset();
  attempt_.prefill_load.reset();
  metrics_.Outcome(status.error_code()).Increment();
  Finish(status);
}

}  // namespace yoco
