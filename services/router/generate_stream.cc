// The Generate chain. Every step runs on a gRPC callback thread and must not block: worker
// calls are asynchronous, a wait for workers is an alarm, and a token is read from the decode
// worker only after the client took the previous one (the client's pace holds the stream back,
// not a thread).
#include "services/router/generate_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/engine/sampler.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/text/utf8_stream.h"

namespace yoco {
namespace {

// How often a request that found no healthy pair looks again (within wait_for_workers).
constexpr auto kWorkerWaitPoll = std::chrono::milliseconds(100);

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

bool Retryable(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE ||
         st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         st.error_code() == grpc::StatusCode::ABORTED ||
         st.error_code() == grpc::StatusCode::INTERNAL ||
         st.error_code() == grpc::StatusCode::UNKNOWN;
}

}  // namespace

// The Decode call: forwards each event to the stream, which reads the next one when the client
// has taken the last. A hold keeps the call open between reads (without it the call could end,
// and its reader go, while a token is being written to the client); it goes when a read fails
// (the stream's end) or when the stream stops reading (Abandon).
class GenerateStream::DecodeRelay final : public grpc::ClientReadReactor<v1::DecodeEvent> {
 public:
  DecodeRelay(GenerateStream& stream, v1::DecodeRequest request)
      : stream_(stream), request_(std::move(request)) {}

  void Start(v1::DecodeWorker::Stub& stub, std::chrono::system_clock::time_point deadline) {
    context_.set_deadline(deadline);
    stub.async()->Decode(&context_, &request_, this);
    AddHold();
    StartRead(&event_);
    StartCall();
  }
  // The chain's calls, one at a time, never while a read is outstanding.
  void ReadNext() { StartRead(&event_); }
  void Abandon() {
    context_.TryCancel();
    Release();
  }
  // From any thread: ends an outstanding read, and with it the chain's reading.
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (ok) {
      stream_.OnDecodeEvent(event_);  // it calls ReadNext or Abandon
    } else {
      Release();
    }
  }
  void OnDone(const grpc::Status& status) override { stream_.OnDecodeDone(status); }

 private:
  void Release() {
    if (held_) {
      held_ = false;
      RemoveHold();
    }
  }

  GenerateStream& stream_;
  const v1::DecodeRequest request_;
  grpc::ClientContext context_;
  v1::DecodeEvent event_;
  bool held_ = true;  // the chain's
};

GenerateStream::GenerateStream(RouterService& router, grpc::CallbackServerContext* context,
                               const v1::GenerateRequest* request)
    : router_(router), context_(context), request_(request) {
  absl::StatusOr<RouterService::CallScope> scope =
      router_.Scope(*context_, !request_->cache_salt().empty(), request_->cache_salt());
  if (!scope.ok()) {
    FinishWith(ToGrpcStatus(scope.status()));
    return;
  }
  scope_ = *std::move(scope);
  if (router_.metrics_ && !scope_.tenant.empty()) {
    router_.metrics_->tenant_requests.Add({{"tenant", scope_.tenant}}).Increment();
  }
  absl::StatusOr<GenerateCall> call = CheckGenerateRequest(
      *request_, router_.config_, *router_.tokenizer_, router_.options_.default_max_new_tokens);
  if (!call.ok()) {
    if (const std::string field = InvalidField(call.status()); !field.empty()) {
      context_->AddTrailingMetadata(kInvalidFieldMetadata, field);
    }
    FinishWith(ToGrpcStatus(call.status()));
    return;
  }
  call_ = *std::move(call);
  load_wait_until_ = std::min(context_->deadline(),
                              std::chrono::system_clock::now() +
                                  absl::ToChronoMilliseconds(router_.options_.max_load_wait));
  Attempt();
}

GenerateStream::~GenerateStream() = default;

void GenerateStream::BeginOp() {
  std::lock_guard<std::mutex> lock(mu_);
  ++ops_;
}

void GenerateStream::EndOp() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = --ops_ == 0 && done_;
  }
  if (last) delete this;
}

void GenerateStream::OnDone() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
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
  if (waiting != 0 && router_.load_queue_.Remove(waiting)) OnRoom(true);
}

void GenerateStream::Attempt() {
  if (attempt_ >= router_.options_.attempts || reason_ != v1::FINISH_REASON_UNSPECIFIED) {
    Complete();
    return;
  }
  if (attempt_ > 0 && router_.metrics_) router_.metrics_->retries.Increment();
  if (context_->IsCancelled()) {
    FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    return;
  }
  input_ = call_.prompt;
  input_.insert(input_.end(), generated_.begin(), generated_.end());
  // A sequence no decode worker's state budget can hold is refused before any work. Its K/V
  // rows: the input plus every token still to come but the last (never fed back).
  const uint64_t rows = input_.size() + call_.max_new_tokens - generated_.size() - 1;
  if (const uint64_t longest = router_.decode_workers_->LongestSequenceRows();
      longest > 0 && rows > longest) {
    FinishWith(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("the request needs ", rows, " K/V rows on a decode worker (", input_.size(),
                     " prompt tokens + max_new_tokens ", call_.max_new_tokens - generated_.size(),
                     " - 1); the largest decode worker's state budget (--memory-budget-mb) holds ",
                     longest,
                     ": shorten the prompt or max_new_tokens, or give decode workers "
                     "more memory")));
    return;
  }
  keys_ = router_.UsableKeys(scope_.salt, input_);
  wait_until_ = std::min(context_->deadline(),
                         std::chrono::system_clock::now() +
                             absl::ToChronoMilliseconds(router_.options_.wait_for_workers));
  ChooseWorkers();
}

void GenerateStream::ChooseWorkers() {
  std::vector<size_t> skip_decode = bad_decode_, skip_prefill = bad_prefill_;
  skip_decode.insert(skip_decode.end(), busy_decode_.begin(), busy_decode_.end());
  skip_prefill.insert(skip_prefill.end(), busy_prefill_.begin(), busy_prefill_.end());
  // A decode worker that holds the prompt's document needs only the question's rows shipped.
  decode_choice_ =
      router_.decode_workers_->Choose(skip_decode, keys_, static_cast<int64_t>(input_.size()),
                                      router_.options_.cache_load_penalty_tokens);
  prefill_choice_ = router_.prefill_workers_->Choose(
      skip_prefill, keys_, static_cast<int64_t>(input_.size()),
      router_.options_.cache_load_penalty_tokens, RouterService::kDiskPenaltyTokens);
  local_ = !force_remote_ &&
           router_.PrefillOnDecodeWorker(decode_choice_, prefill_choice_, input_.size());
  if (decode_choice_.has_value() && (prefill_choice_.has_value() || local_)) {
    const size_t decode_index = decode_choice_->index;
    decode_in_flight_.emplace(*router_.decode_workers_, decode_index);
    if (!local_) {
      StartRemotePrefill();
      return;
    }
    if (!cache_reported_) {
      cache_reported_ = true;
      finish_.set_cache_tier("none");
      finish_.set_cache_miss_reason("none");
    }
    finish_.set_local_prefill(true);
    if (router_.metrics_) router_.metrics_->local_prefills.Increment();
    v1::DecodeRequest dec;
    dec.set_request_id(request_->request_id());
    dec.mutable_prompt()->Add(input_.begin(), input_.end());
    ToProto(call_.sampling, dec.mutable_sampling());
    dec.set_max_new_tokens(call_.max_new_tokens - static_cast<uint32_t>(generated_.size()));
    dec.set_stop_at_eos(call_.stop_at_eos);
    StartDecode(std::move(dec), /*local=*/true);
    return;
  }
  if (!busy_prefill_.empty() || !busy_decode_.empty()) {  // refused for load, not failed
    WaitForRoom();
    return;
  }
  // Only a request that has not yet lost a worker of its own waits: the others retry on what
  // is healthy or fail.
  if (bad_decode_.empty() && bad_prefill_.empty() && !context_->IsCancelled() &&
      std::chrono::system_clock::now() < wait_until_) {
    grpc::Alarm* alarm;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cancelled_) {
        alarms_.push_back(std::make_unique<grpc::Alarm>());
        alarm = alarms_.back().get();
        ++ops_;
      } else {
        alarm = nullptr;
      }
    }
    if (alarm != nullptr) {
      alarm->Set(std::chrono::system_clock::now() + kWorkerWaitPoll, [this](bool) {
        if (context_->IsCancelled()) {
          FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
        } else {
          ChooseWorkers();
        }
        EndOp();
      });
      return;
    }
  }
  // A worker's own refusal (RESOURCE_EXHAUSTED: all full) says more than this.
  if (last_error_.ok()) {
    last_error_ =
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "no healthy prefill or decode worker");
  }
  reason_ = v1::FINISH_REASON_UNSPECIFIED;
  Complete();
}

void GenerateStream::WaitForRoom() {
  if (context_->IsCancelled()) {
    FinishWith(RouterService::ClientGoneStatus(*context_, last_error_));
    return;
  }
  if (std::chrono::system_clock::now() >= load_wait_until_) {
    reason_ = v1::FINISH_REASON_UNSPECIFIED;
    Complete();  // with last_error_: the workers' refusal
    return;
  }
  BeginOp();  // the queue's: OnRoom ends it
  BeginOp();  // this function's: OnRoom may run on another thread before it returns
  uint64_t first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    room_answered_ = false;
    first = first_place_;
  }
  absl::StatusOr<uint64_t> place = router_.load_queue_.Push(
      scope_.tenant, [this](bool turn) { OnRoom(turn); }, first);
  if (!place.ok()) {  // never queued: no OnRoom
    last_error_ = ToGrpcStatus(place.status());
    reason_ = v1::FINISH_REASON_UNSPECIFIED;
    Complete();
    EndOp();
    EndOp();
    return;
  }
  if (router_.metrics_ && first == 0) router_.metrics_->load_waits.Increment();
  // Cancelled before the place was known here, OnCancel could not take it out: this does.
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_place_ == 0) first_place_ = *place;
    if (!room_answered_) {
      waiting_place_ = *place;
      cancelled = cancelled_;
    }
  }
  if (cancelled && router_.load_queue_.Remove(*place)) OnRoom(true);
  EndOp();
}

void GenerateStream::OnRoom(bool turn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_place_ = 0;
    room_answered_ = true;
  }
  if (context_->IsCancelled()) {
    FinishWith(RouterService::ClientGoneStatus(*context_, last_error_));
  } else if (!turn) {
    last_error_ =
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "every worker is at its queue bound and the router's wait queue is "
                     "full: this request gave its place to another tenant's; retry later");
    reason_ = v1::FINISH_REASON_UNSPECIFIED;
    Complete();
  } else {
    busy_prefill_.clear();
    busy_decode_.clear();
    ChooseWorkers();
  }
  EndOp();
}

void GenerateStream::StartRemotePrefill() {
  const size_t prefill_index = prefill_choice_->index;
  if (prefill_choice_->better_holder.has_value()) {
    router_.CopySnapshotLater(*prefill_choice_, keys_);
  }
  // Prefill the prompt plus whatever was already sent; it returns the next token.
  prefill_request_.Clear();
  prefill_request_.set_request_id(request_->request_id());
  prefill_request_.mutable_prompt()->Add(input_.begin(), input_.end());
  prefill_request_.set_cache_salt(scope_.salt);
  ToProto(call_.sampling, prefill_request_.mutable_sampling());
  prefill_request_.set_decode_ucx_address(decode_choice_->info.ucx_address());
  prefill_request_.set_transfer_timeout_ms(router_.options_.transfer_timeout_ms);
  prefill_request_.set_max_new_tokens(call_.max_new_tokens -
                                      static_cast<uint32_t>(generated_.size()));
  prefill_request_.set_stop_at_eos(call_.stop_at_eos);
  prefill_request_.set_decode_resident_blocks(
      static_cast<uint32_t>(decode_choice_->cached_tokens / kCacheBlockTokens));
  prefill_response_.Clear();
  prefill_in_flight_.emplace(*router_.prefill_workers_, prefill_index);
  // Propagates the client's deadline and cancellation to the prefill worker.
  grpc::ClientContext* context;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prefill_contexts_.push_back(grpc::ClientContext::FromCallbackServerContext(*context_));
    context = prefill_contexts_.back().get();
    ++ops_;
    if (cancelled_) context->TryCancel();
  }
  router_.prefill_stubs_[prefill_index]->async()->Prefill(
      context, &prefill_request_, &prefill_response_, [this, context](grpc::Status status) {
        const auto& trailers = context->GetServerTrailingMetadata();
        const auto blamed = trailers.find(kFailedPeerMetadata);
        const bool decode_blamed =
            !status.ok() && blamed != trailers.end() && blamed->second == kFailedPeerDecode;
        prefill_in_flight_.reset();
        // A prefill worker's queue has one more place: the next waiter's turn.
        if (router_.load_queue_.waiting() > 0) router_.load_queue_.WakeNext();
        if (decode_blamed) {
          // The prompt was prefilled but its state could not reach the decode worker (dead
          // before the probes noticed): that worker failed; the same prefill worker may serve
          // the retry.
          last_error_ = status;
          router_.decode_workers_->MarkFailed(decode_choice_->index);
          if (router_.metrics_) router_.metrics_->decode_worker_failures.Increment();
          bad_decode_.push_back(decode_choice_->index);
          if (RouterService::ClientGone(*context_)) {
            FinishWith(RouterService::ClientGoneStatus(*context_, status));
          } else {
            NextAttempt();
          }
        } else {
          OnPrefillDone(status);
        }
        EndOp();
      });
}

void GenerateStream::OnPrefillDone(const grpc::Status& status) {
  const size_t prefill_index = prefill_choice_->index, decode_index = decode_choice_->index;
  if (!status.ok()) {
    // The client's own deadline or cancellation says nothing about the worker.
    if (RouterService::ClientGone(*context_)) {
      FinishWith(RouterService::ClientGoneStatus(*context_, status));
      return;
    }
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      // A full queue (the prefill worker's, or the decode worker's refusing the bundle) is
      // load, not failure: another pair for this request, both stay healthy, and once every
      // pair has refused the request waits for room. Not an attempt: nothing failed.
      last_error_ = status;
      busy_prefill_.push_back(prefill_index);
      busy_decode_.push_back(decode_index);
      decode_in_flight_.reset();
      ChooseWorkers();
      return;
    }
    if (!Retryable(status)) {
      FinishWith(status);
      return;
    }
    last_error_ = status;
    router_.prefill_workers_->MarkFailed(prefill_index);
    if (router_.metrics_) router_.metrics_->prefill_worker_failures.Increment();
    bad_prefill_.push_back(prefill_index);
    NextAttempt();
    return;
  }
  const v1::PrefillResponse& pre = prefill_response_;
  last_prefill_ = prefill_index;
  if (!cache_reported_) {  // the first prefill is the one that saw the client's prompt
    cache_reported_ = true;
    finish_.mutable_usage()->set_cached_prompt_tokens(
        std::min<uint32_t>(pre.cached_tokens(), static_cast<uint32_t>(call_.prompt.size())));
    finish_.set_cache_tier(pre.cache_tier());
    finish_.set_cache_miss_reason(pre.cache_miss_reason());
    // A worker that never held the prompt's snapshot says "none"; the index may know better.
    if (pre.cache_miss_reason() == "none") {
      if (std::optional<ForgottenReason> why = router_.prefill_workers_->WhyForgotten(keys_)) {
        finish_.set_cache_miss_reason(*why == ForgottenReason::kExpired ? "expired" : "evicted");
      }
    }
    if (router_.metrics_ && pre.cached_tokens() > 0) {
      router_.metrics_->cache_hits.Increment();
      router_.metrics_->cached_prompt_tokens.Increment(pre.cached_tokens());
    }
  }
  finish_.mutable_timings()->set_prefill_ms(finish_.timings().prefill_ms() + pre.prefill_ms());
  finish_.mutable_timings()->set_transfer_ms(finish_.timings().transfer_ms() + pre.transfer_ms());
  finish_.set_transfer_bytes(finish_.transfer_bytes() + pre.bundle_bytes());
  if (pre.transfer_id() != 0 && !keys_.empty() && decode_choice_.has_value()) {
    router_.decode_workers_->NoteHeld(decode_choice_->index, keys_.back());
  }
  const int32_t first = pre.first_token();
  Emit(first, [this, first] {
    if (std::optional<v1::FinishReason> stop = StopsAt(first)) {
      reason_ = *stop;
    } else if (stop_string_hit_) {
      reason_ = v1::FINISH_REASON_STOP;
    } else if (generated_.size() >= call_.max_new_tokens) {
      reason_ = v1::FINISH_REASON_LENGTH;
    }
    if (reason_ != v1::FINISH_REASON_UNSPECIFIED) {
      Complete();
      return;
    }
    // Transfer ids start at 1: an id of 0 means nothing was shipped (a worker from before
    // bundle_shipped existed always ships).
    const v1::PrefillResponse& shipped = prefill_response_;
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
    dec.set_wait_for_bundle_ms(router_.options_.transfer_timeout_ms);
    dec.set_stop_at_eos(call_.stop_at_eos);
    StartDecode(std::move(dec), /*local=*/false);
  });
}

void GenerateStream::StartDecode(v1::DecodeRequest request, bool local) {
  decode_reason_ = v1::FINISH_REASON_UNSPECIFIED;
  decode_first_token_ = local;  // a local prefill's time ends with the first token
  decode_start_ = std::chrono::steady_clock::now();
  DecodeRelay* relay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    relays_.push_back(std::make_unique<DecodeRelay>(*this, std::move(request)));
    relay = relays_.back().get();
    ++ops_;
  }
  // Watched before it starts, so that its end (Unwatch) always comes after.
  stall_id_ = router_.stall_watch_->Watch(decode_choice_->index, [this, relay] {
    stalled_ = true;
    relay->Cancel();
  });
  relay->Start(*router_.decode_stubs_[decode_choice_->index], context_->deadline());
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) relay->Cancel();
}

void GenerateStream::OnDecodeEvent(const v1::DecodeEvent& event) {
  DecodeRelay* relay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    relay = relays_.back().get();
  }
  if (event.has_finish()) {
    decode_reason_ = event.finish().reason();
    relay->ReadNext();  // to the end of the stream
    return;
  }
  if (!event.has_token()) {
    relay->ReadNext();
    return;
  }
  router_.stall_watch_->Progress(stall_id_);
  if (decode_first_token_) {
    decode_first_token_ = false;
    finish_.mutable_timings()->set_prefill_ms(finish_.timings().prefill_ms() +
                                              MsSince(decode_start_));
  }
  Emit(event.token().id(), [this, relay] {
    if (stop_string_hit_) {  // the decode worker's sequence ends with the call
      decode_reason_ = v1::FINISH_REASON_STOP;
      relay->Abandon();
      return;
    }
    relay->ReadNext();
  });
}

void GenerateStream::OnDecodeDone(const grpc::Status& status) {
  finish_.mutable_timings()->set_decode_ms(finish_.timings().decode_ms() + MsSince(decode_start_));
  router_.stall_watch_->Unwatch(stall_id_);
  // A decode worker has room for one more sequence: the next waiter's turn.
  if (router_.load_queue_.waiting() > 0) router_.load_queue_.WakeNext();
  const bool stalled = stalled_.exchange(false);
  if (finished_) {  // the client went away while a token was being written
    EndOp();
    return;
  }
  const size_t decode_index = decode_choice_->index;
  // A worker's CANCELLED is no finish this client asked for (its own cancel ends the call before
  // any reply): like a stream that ended early, another pair continues it.
  if (decode_reason_ != v1::FINISH_REASON_UNSPECIFIED &&
      decode_reason_ != v1::FINISH_REASON_CANCELLED) {
    reason_ = decode_reason_;
    Complete();
  } else if (!status.ok() && RouterService::ClientGone(*context_)) {
    FinishWith(RouterService::ClientGoneStatus(*context_, status));
  } else if (stalled) {
    // Stopped sending (failed its health probe, or no token long past its pace): as if it had
    // died, the tokens sent so far go on from another pair.
    last_error_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the decode worker stalled");
    router_.decode_workers_->MarkFailed(decode_index);
    if (router_.metrics_) {
      router_.metrics_->decode_worker_failures.Increment();
      router_.metrics_->stalled_streams.Increment();
    }
    bad_decode_.push_back(decode_index);
    NextAttempt();
  } else if (local_ && (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                        status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)) {
    // It does not prefill (any more), or its prefill queue is full: a prefill worker's turn.
    last_error_ = status;
    force_remote_ = true;
    NextAttempt();
  } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    // It can never hold this sequence (its whole state-memory budget is smaller): another
    // decode worker may; this one stays healthy for everyone else.
    last_error_ = status;
    bad_decode_.push_back(decode_index);
    decode_in_flight_.reset();
    Attempt();
  } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // Its batch and queue are full: load, not failure. The tokens sent so far go on from
    // another pair, or from this one when it has room (WaitForRoom); not an attempt.
    last_error_ = status;
    busy_decode_.push_back(decode_index);
    decode_in_flight_.reset();
    Attempt();
  } else if (!status.ok() && !Retryable(status)) {
    FinishWith(status);
  } else {
    last_error_ = status.ok()
                      ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode stream ended early")
                      : status;
    // Continue on another pair with the tokens sent so far.
    router_.decode_workers_->MarkFailed(decode_index);
    if (router_.metrics_) router_.metrics_->decode_worker_failures.Increment();
    bad_decode_.push_back(decode_index);
    NextAttempt();
  }
  EndOp();
}

void GenerateStream::NextAttempt() {
  decode_in_flight_.reset();
  ++attempt_;
  Attempt();
}

std::optional<v1::FinishReason> GenerateStream::StopsAt(int32_t id) const {
  const auto& ids = call_.sampling.stop_token_ids;
  if (std::find(ids.begin(), ids.end(), id) != ids.end()) return v1::FINISH_REASON_STOP;
  if (call_.stop_at_eos && id == kEosId) return v1::FINISH_REASON_EOS;
  return std::nullopt;
}

void GenerateStream::Emit(int32_t id, std::function<void()> then) {
  generated_.push_back(id);
  out_.Clear();
  out_.mutable_token()->set_id(id);
  out_.mutable_token()->set_index(static_cast<uint32_t>(generated_.size() - 1));
  // Each token's bytes are appended once; a token the tokenizer cannot spell (a model
  // vocabulary larger than the tokenizer's) shows as U+FFFD.
  auto bytes = router_.tokenizer_->Decode({&id, 1});
  output_bytes_ += bytes.ok() ? *bytes : std::string("\xEF\xBF\xBD");
  std::string text;
  AppendValidUtf8(output_bytes_, &text_pos_, &text);
  out_.mutable_token()->set_text(text);
  // Stop strings end the stream after the token that completes one.
  const size_t before = sent_text_.size();
  sent_text_ += text;
  for (const std::string& stop : call_.stop_strings) {
    const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
    if (!stop.empty() && sent_text_.find(stop, from) != std::string::npos) stop_string_hit_ = true;
  }
  const auto now = std::chrono::steady_clock::now();
  RouterMetrics* metrics = router_.metrics_;
  if (generated_.size() == 1) {
    finish_.mutable_timings()->set_ttft_ms(MsSince(start_));
    if (metrics) {
      metrics->time_to_first_token.Observe(std::chrono::duration<double>(now - start_).count());
    }
  } else if (metrics) {
    metrics->inter_token.Observe(std::chrono::duration<double>(now - last_token_time_).count());
  }
  last_token_time_ = now;
  if (metrics) metrics->generated_tokens.Increment();
  if (scope_.generated_tokens != nullptr) scope_.generated_tokens->Increment();
  after_write_ = std::move(then);
  StartWrite(&out_);
}

void GenerateStream::OnWriteDone(bool ok) {
  std::function<void()> then = std::move(after_write_);
  after_write_ = nullptr;
  if (finished_) {  // the finish message
    if (ok) {
      then();
    } else {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    }
    return;
  }
  if (!ok) {
    // The client is gone: end the decode call, if any (its completion sees finished_). No read
    // is outstanding while a token is written.
    FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    DecodeRelay* relay = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!relays_.empty()) relay = relays_.back().get();
    }
    if (relay != nullptr) relay->Abandon();  // a no-op on an earlier attempt's
    return;
  }
  if (then) then();
}

void GenerateStream::Complete() {
  if (reason_ == v1::FINISH_REASON_UNSPECIFIED) {
    FinishWith(last_error_);
    return;
  }
  decode_in_flight_.reset();
  finish_.set_reason(reason_);
  finish_.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(call_.prompt.size()));
  finish_.mutable_usage()->set_generated_tokens(static_cast<uint32_t>(generated_.size()));
  if (scope_.prompt_tokens != nullptr) scope_.prompt_tokens->Increment(call_.prompt.size());
  if (router_.options_.snapshot_conversations && last_prefill_.has_value()) {
    std::vector<int32_t> conversation = call_.prompt;
    conversation.insert(conversation.end(), generated_.begin(), generated_.end());
    router_.SnapshotConversation(*last_prefill_, call_.prompt.size(), std::move(conversation),
                                 scope_.salt);
  }
  if (router_.metrics_) router_.metrics_->Outcome(grpc::StatusCode::OK).Increment();
  finished_ = true;
  out_.Clear();
  *out_.mutable_finish() = finish_;
  // Written, then finished once written: StartWriteAndFinish's message can be lost on the
  // in-process transport (the HTTP front's) when the client reads it only after the status.
  after_write_ = [this] { Finish(grpc::Status::OK); };
  StartWrite(&out_);
}

void GenerateStream::FinishWith(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  decode_in_flight_.reset();
  prefill_in_flight_.reset();
  if (router_.metrics_) router_.metrics_->Outcome(status.error_code()).Increment();
  Finish(status);
}

}  // namespace yoco
