// The Generate chain. Every step runs on a gRPC callback thread and must not block: worker
// calls are asynchronous, a wait for workers is an alarm, and a token is read from the decode
// worker only after the client took the previous one (the client's pace holds the stream back,
// not a thread).
#include "services/router/generate_stream.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "lib/log/log.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"

namespace yoco {
namespace {

// Whether a failed prefill call's trailers say the decode worker was the cause (the bundle did
// not reach it).
bool DecodeBlamed(const grpc::Status& status, const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto blamed = trailers.find(kFailedPeerMetadata);
  return !status.ok() && blamed != trailers.end() && blamed->second == kFailedPeerDecode;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

GenerateStream::GenerateStream(WorkerPool& pool, grpc::CallbackServerContext* context,
                               const v1::GenerateRequest* request)
    : pool_(pool),
      metrics_(pool.metrics()),
      context_(context),
      request_(request),
      trace_(*context, pool.options().model_name),
      ledger_(pool, trace_, admitted_, start_),
      search_(pool, *context, ops_, trace_,
              {.found = [this](const WorkerPair& pair) { OnPairFound(pair); },
               .ended = [this](const grpc::Status& status) { FinishWith(status); },
               .end_op = [this] { EndOp(); }}) {
  if (absl::Status admitted = AdmitGenerate(pool_, *context_, *request_, trace_, admitted_);
      !admitted.ok()) {
    FinishWith(ToGrpcStatus(admitted));
    return;
  }
  if (request_->model_version() != 0) {
    version_ = request_->model_version();
    last_error_ = grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrFormat("no healthy prefill and decode worker of model_version %016x", version_));
  }
  choices_ = ChoiceSet(admitted_.call, pool_.tokenizer(), start_);
  StartAttempt(/*retry=*/false);
}

GenerateStream::~GenerateStream() = default;

void GenerateStream::EndOp() {
  if (ops_.End()) delete this;
}

void GenerateStream::OnDone() {
  if (ops_.CallDone()) delete this;
}

void GenerateStream::OnCancel() {
  // The step in flight ends with CANCELLED and the chain finishes the call.
  ops_.Cancel();
  search_.Cancel();  // out of the load queue at once, not in its turn
}

bool GenerateStream::InPhase(Phase expected) {
  if (phase_ == expected) return true;
  LogError("a request's step ran in the wrong phase")
      .With("request_id", admitted_.request_id)
      .With("expected", static_cast<int>(expected))
      .With("phase", static_cast<int>(phase_));
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
    FinishWith(ClientCancelledStatus());
    return;
  }
  attempt_ = Attempt();
  phase_ = Phase::kChoosing;
  attempt_.input = admitted_.call.prompt;
  // Choices go on from the prompt's state, each replaying its own tokens (DecodeChoice.sent).
  const SentTokens& sent = choices_.sent(0);
  if (!multi()) attempt_.input.insert(attempt_.input.end(), sent.ids().begin(), sent.ids().end());
  // A sequence no decode worker's state budget can hold is refused before any work.
  if (absl::Status fits = CheckFitsDecodeWorker(
          attempt_.input.size(), multi() ? admitted_.call.max_new_tokens : sent.still_to_come(),
          pool_.LongestSequenceRows());
      !fits.ok()) {
    FinishWith(ToGrpcStatus(fits));
    return;
  }
  attempt_.keys = pool_.UsableKeys(admitted_.scope.salt, attempt_.input);
  trace_.StartChoosing(attempts_);
  PairRequest want;
  want.keys = attempt_.keys;
  want.input_tokens = attempt_.input.size();
  want.version = version_;
  search_.Start(want, FromProto(admitted_.scheduling), last_error_);
}

void GenerateStream::OnPairFound(const WorkerPair& pair) {
  if (!InPhase(Phase::kChoosing)) return;
  attempt_.pair = pair;
  trace_.Chosen(
      pair.local ? "local" : pool_.WorkerAddress(WorkerRole::kPrefill, pair.prefill->index),
      pool_.WorkerAddress(WorkerRole::kDecode, pair.decode->index));
  attempt_.decode_load = pool_.CountRequest(WorkerRole::kDecode, pair.decode->index);
  if (!pair.local) {
    StartRemotePrefill();
    return;
  }
  ledger_.LocalPrefill();
  attempt_.prefill_ends_at_first_token = true;
  StartDecode(LocalDecodeRequest(Asked()));
}

void GenerateStream::StartRemotePrefill() {
  phase_ = Phase::kPrefilling;
  const WorkerChoice& prefill = *attempt_.pair.prefill;
  const WorkerChoice& decode = *attempt_.pair.decode;
  ledger_.PrefillCalled(prefill.index);
  if (prefill.better_holder.has_value()) pool_.CopySnapshotLater(prefill, attempt_.keys);
  // Prefill the prompt plus whatever was already sent; it returns the next token.
  attempt_.prefill_request =
      RemotePrefillRequest(Asked(), admitted_.scope.salt, decode.info.ucx_address(),
                           static_cast<uint32_t>(decode.cached_tokens / kCacheBlockTokens),
                           pool_.options().transfer_timeout_ms);
  // A decode worker too old to read a trace context in a transfer's header would refuse it.
  attempt_.prefill_request.set_trace_transfer(decode.info.reads_traced_transfers());
  attempt_.prefill_load = pool_.CountRequest(WorkerRole::kPrefill, prefill.index);
  // (Choices stay on the plain call: their first tokens may end some of them.)
  if (prefill.info.streams_first_token() && !multi()) {
    StartPrefillStream();
    return;
  }
  // Propagates the client's deadline and cancellation to the prefill worker.
  grpc::ClientContext* context =
      ops_.Keep(grpc::ClientContext::FromCallbackServerContext(*context_));
  trace_.StartPrefill(pool_.WorkerAddress(WorkerRole::kPrefill, prefill.index), context);
  if (ops_.cancelled()) context->TryCancel();
  pool_.PrefillStub(prefill.index)
      .async()
      ->Prefill(context, &attempt_.prefill_request, &attempt_.prefill_response,
                [this, context](grpc::Status status) {
                  OnPrefillDone(status, DecodeBlamed(status, *context));
                  EndOp();
                });
}

void GenerateStream::StartPrefillStream() {
  const size_t index = attempt_.pair.prefill->index;
  auto relay = std::make_unique<PrefillRelay>(
      grpc::ClientContext::FromCallbackServerContext(*context_),
      std::move(attempt_.prefill_request),
      [this](const v1::PrefillResponse& message) { OnPrefillMessage(message); },
      [this](const grpc::Status& status) { OnPrefillStreamDone(status); });
  trace_.StartPrefill(pool_.WorkerAddress(WorkerRole::kPrefill, index), relay->context());
  attempt_.prefill_relay = ops_.Keep(std::move(relay));
  attempt_.prefill_relay->Start(pool_.PrefillStub(index));
  if (ops_.cancelled()) attempt_.prefill_relay->Cancel();
}

void GenerateStream::OnPrefillMessage(const v1::PrefillResponse& message) {
  PrefillRelay* relay = attempt_.prefill_relay;
  if (!InPhase(Phase::kPrefilling)) {
    relay->Abandon();
    return;
  }
  if (!message.first_token_only()) {
    attempt_.prefill_response = message;
    attempt_.prefill_answered = true;
    relay->ReadNext();  // to the stream's end, which says how the call ended
    return;
  }
  absl::StatusOr<std::vector<v1::GeneratedToken>> first = choices_.FirstTokensToSend(message);
  if (attempt_.first_sent_early || !first.ok()) {
    FinishWith(grpc::Status(grpc::StatusCode::INTERNAL,
                            first.ok() ? "the prefill worker sent its first token twice"
                                       : std::string(first.status().message())));
    relay->Abandon();
    return;
  }
  attempt_.first_tokens = *std::move(first);
  attempt_.first_sent_early = true;
  EmitFirstTokens(0);
}

void GenerateStream::OnPrefillStreamDone(const grpc::Status& status) {
  if (phase_ == Phase::kFinished) {  // the client went, or the first token ended the request
    EndOp();
    return;
  }
  if (status.ok() && !attempt_.prefill_answered) {
    OnPrefillDone(grpc::Status(grpc::StatusCode::INTERNAL,
                               "the prefill worker's stream ended without its answer"),
                  false);
  } else {
    OnPrefillDone(status, DecodeBlamed(status, *attempt_.prefill_relay->context()));
  }
  EndOp();
}

void GenerateStream::OnPrefillDone(const grpc::Status& status, bool decode_blamed) {
  if (!InPhase(Phase::kPrefilling)) return;
  trace_.PrefillDone(status, attempt_.prefill_response);
  attempt_.prefill_load.reset();
  // A prefill worker's queue has one more place: the next waiter's turn. Not after a refusal,
  // which freed nothing: the woken waiter would be refused in turn and wake the next, a loop of
  // refusals at RPC speed in which whoever tried when a place did free took it, not the first in
  // line. (A bundle the decode worker refused did free a place; the queue's tick wakes for it.)
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      pool_.load_queue().waiting() > 0) {
    pool_.load_queue().WakeNext();
  }
  if (!status.ok()) {
    AttemptEnd end;
    end.call = WorkerRole::kPrefill;
    end.code = status.error_code();
    end.client_gone = FailureIsTheClients(end.code, *context_);
    end.decode_blamed = decode_blamed;
    Fail(end, status);
    return;
  }
  const v1::PrefillResponse& pre = attempt_.prefill_response;
  last_prefill_ = attempt_.pair.prefill->index;
  ledger_.PrefillAnswered(pre, [this] { return pool_.WhyForgotten(attempt_.keys); });
  if (pre.transfer_id() != 0 && !attempt_.keys.empty()) {
    pool_.NoteHeld(attempt_.pair.decode->index, attempt_.keys.back());
  }
  if (attempt_.first_sent_early) {  // the client has it: the bundle is at the decode worker
    phase_ = Phase::kDecoding;
    ContinueAfterFirstToken();
    return;
  }
  absl::StatusOr<std::vector<v1::GeneratedToken>> first = choices_.FirstTokensToSend(pre);
  if (!first.ok()) {
    FinishWith(ToGrpcStatus(first.status()));
    return;
  }
  attempt_.first_tokens = *std::move(first);
  phase_ = Phase::kDecoding;
  EmitFirstTokens(0);
}

void GenerateStream::EmitFirstTokens(size_t i) {
  if (i < attempt_.first_tokens.size()) {
    const v1::GeneratedToken& first = attempt_.first_tokens[i];
    Emit(
        first,
        [this, i, c = first.choice(), id = first.id()] {
          choices_.EndIfItEndsAt(c, id);
          EmitFirstTokens(i + 1);
        },
        first.choice());
  } else if (choices_.AllEnded()) {
    PrefillRelay* streaming = phase_ == Phase::kPrefilling ? attempt_.prefill_relay : nullptr;
    Complete(choices_.FirstEnd(v1::FINISH_REASON_LENGTH));
    // No decode call comes for its bundle (after Complete, whose phase its end must see).
    if (streaming != nullptr) streaming->Abandon();
  } else if (phase_ == Phase::kPrefilling) {
    attempt_.prefill_relay->ReadNext();  // its answer: the bundle reached the decode worker
  } else {
    ContinueAfterFirstToken();
  }
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
  StartDecode(ShippedDecodeRequest(Asked(), shipped, pool_.options().transfer_timeout_ms));
}

void GenerateStream::StartDecode(v1::DecodeRequest request) {
  phase_ = Phase::kDecoding;
  attempt_.decode_start = std::chrono::steady_clock::now();
  ledger_.DecodeCalled(attempt_.pair.decode->index);
  DecodeRelay* relay = ops_.Keep(std::make_unique<DecodeRelay>(
      std::move(request), [this](const v1::DecodeEvent& event) { OnDecodeEvent(event); },
      [this](const grpc::Status& status) { OnDecodeDone(status); }));
  const size_t decode_index = attempt_.pair.decode->index;
  // Watched before it starts, so that its end (Unwatch) always comes after.
  attempt_.stall_id = pool_.stall_watch().Watch(decode_index, [this, relay] {
    stalled_ = true;
    relay->Cancel();
  });
  relay->Start(pool_.DecodeStub(decode_index), context_->deadline(),
               trace_.StartDecode(pool_.WorkerAddress(WorkerRole::kDecode, decode_index)));
  if (ops_.cancelled()) relay->Cancel();
}

void GenerateStream::OnDecodeEvent(const v1::DecodeEvent& event) {
  DecodeRelay* relay = ops_.last_relay();
  const uint32_t c = event.choice();  // 0 without choices
  if (c >= choices_.size()) {
    relay->Abandon();  // (its done callback fails the attempt, which marks nobody)
    return;
  }
  if (event.has_finish()) {
    // (A choice this router ended comes back CANCELLED, which ends nothing.)
    if (event.finish().reason() != v1::FINISH_REASON_CANCELLED) {
      attempt_.decode_reason = event.finish().reason();
    }
    choices_.WorkerFinished(c, event.finish().reason());
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
    ledger_.report().AddPrefillMs(MsSince(attempt_.decode_start));
  }
  if (choices_.ended(c)) {  // a stop string ended it; the worker was asked to end it too
    relay->ReadNext();
    return;
  }
  const bool first = choices_.sent(c).ids().empty();  // a local prefill's
  Emit(
      event.token(),
      [this, relay, c, first, id = event.token().id()] {
        choices_.Sent(c, first, id);
        if (choices_.AllEnded()) {  // the decode worker's sequences end with the call
          attempt_.decode_reason = choices_.FirstEnd(v1::FINISH_REASON_LENGTH);
          relay->Abandon();
          return;
        }
        // A stop string ended it (or a local prefill's first token): the worker stops it too.
        if (choices_.ended(c)) relay->EndChoice(c);
        relay->ReadNext();
      },
      c);
}

void GenerateStream::OnDecodeDone(const grpc::Status& status) {
  ledger_.report().AddDecodeMs(MsSince(attempt_.decode_start));
  trace_.DecodeDone(status, attempt_.decode_reason);
  pool_.stall_watch().Unwatch(attempt_.stall_id);
  // A decode worker has room for one more sequence: the next waiter's turn (not after a refusal,
  // as above).
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      pool_.load_queue().waiting() > 0) {
    pool_.load_queue().WakeNext();
  }
  const bool stalled = stalled_.exchange(false);
  if (phase_ == Phase::kFinished) {  // the client went away while a token was being written
    EndOp();
    return;
  }
  if (InPhase(Phase::kDecoding)) {
    AttemptEnd end;
    end.call = WorkerRole::kDecode;
    end.code = status.error_code();
    end.client_gone = FailureIsTheClients(end.code, *context_);
    // A worker's CANCELLED ends no choice (this client's own cancel ends the call before any
    // reply): like a stream that ended early, another pair continues it.
    end.finished = choices_.AllEnded();
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
  last_error_ = AttemptError(end, status);
  LogDebug("attempt failed")
      .With("request_id", admitted_.request_id)
      .With("attempt", attempts_)
      .With("call", end.call == WorkerRole::kPrefill ? "prefill" : "decode")
      .With("retry", f.next == Failover::Next::kRetry)
      .With("error", last_error_.error_message());
  if (end.stalled) metrics_.stalled_streams.Increment();
  search_.AttemptEnded(attempt_.pair, f);
  StartAttempt(/*retry=*/f.next == Failover::Next::kRetry);
}

AttemptRequest GenerateStream::Asked() const {
  // With choices the prefill's bound counts each choice's first token: the whole request's.
  return {admitted_.request_id,
          attempt_.input,
          static_cast<uint32_t>(attempt_.input.size() - admitted_.call.prompt.size()),
          admitted_.call.sampling,
          multi() ? admitted_.call.max_new_tokens : choices_.sent(0).still_to_come(),
          admitted_.call.stop_at_eos,
          admitted_.scheduling,
          multi() ? choices_.StillGoing() : std::vector<ChoiceAsked>()};
}

void GenerateStream::Emit(const v1::GeneratedToken& produced, std::function<void()> then,
                          uint32_t choice) {
  SentTokens::Sent sent = choices_.sent(choice).Add(produced, std::chrono::steady_clock::now());
  if (multi()) sent.message.set_choice(choice);
  if (version_ == 0) version_ = attempt_.pair.version();
  ledger_.TokenSent(sent.seconds);
  out_.Clear();
  *out_.mutable_token() = sent.message;
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
    DecodeRelay* relay = ops_.last_relay();
    if (relay != nullptr) relay->Abandon();  // a no-op on an earlier attempt's
    // A streaming prefill whose first token was being written.
    if (attempt_.prefill_relay != nullptr) attempt_.prefill_relay->Abandon();
    return;
  }
  if (then) then();
}

void GenerateStream::Complete(v1::FinishReason reason) {
  attempt_ = Attempt();  // releases the workers' counts
  admitted_.tenant_lease.reset();
  phase_ = Phase::kFinished;
  if (pool_.options().snapshot_conversations && last_prefill_.has_value() && !multi()) {
    std::vector<int32_t> conversation = admitted_.call.prompt;
    const std::vector<int32_t>& sent = choices_.sent(0).ids();
    conversation.insert(conversation.end(), sent.begin(), sent.end());
    pool_.SnapshotConversation(*last_prefill_, admitted_.call.prompt.size(),
                               std::move(conversation), admitted_.scope.salt, admitted_.scheduling);
  }
  out_.Clear();
  *out_.mutable_finish() = Finished(reason);
  ledger_.Ended(grpc::Status::OK, out_.finish(), attempts_, version_);
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
  admitted_.tenant_lease.reset();
  ledger_.Ended(status, ledger_.Finished(v1::FINISH_REASON_UNSPECIFIED), attempts_, version_);
  Finish(status);
}

v1::Finish GenerateStream::Finished(v1::FinishReason reason) {
  if (multi()) reason = choices_.FirstEnd(reason);
  v1::Finish finish = ledger_.Finished(reason);
  if (multi()) choices_.AddFinishes(finish);
  return finish;
}

}  // namespace yoco
