// The Decode call's reactor. Lifetime: the object goes when gRPC (OnDone) and the worker (its
// admission answer, and a finished event unless admission was refused) are done with it.
#include "services/decode/decode_stream.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/proto_convert.h"
#include "lib/rpc/trace_metadata.h"
#include "lib/trace/tracer.h"

namespace yoco {
namespace {

v1::FinishReason ToProto(DecodeFinish reason) {
  switch (reason) {
    case DecodeFinish::kLength:
      return v1::FINISH_REASON_LENGTH;
    case DecodeFinish::kStop:
      return v1::FINISH_REASON_STOP;
    case DecodeFinish::kEos:
      return v1::FINISH_REASON_EOS;
    case DecodeFinish::kCancelled:
    case DecodeFinish::kError:
      return v1::FINISH_REASON_UNSPECIFIED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

// What the call's own fields must hold (the worker checks the rest where it uses them).
absl::Status CheckChoices(const v1::DecodeRequest& request) {
  if (request.choices().empty()) {
    if (request.max_new_tokens() < 1)
      return absl::InvalidArgumentError("max_new_tokens must be >= 1");
    return absl::OkStatus();
  }
  if (request.choices_size() > kMaxChoices) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxChoices, " choices; this call has ", request.choices_size()));
  }
  if (!request.has_sampling()) {
    return absl::InvalidArgumentError("a call with choices must carry its sampling");
  }
  std::set<uint32_t> seen;
  for (const v1::DecodeChoice& c : request.choices()) {
    if (!seen.insert(c.choice()).second) {
      return absl::InvalidArgumentError(absl::StrCat("choice ", c.choice(), " is named twice"));
    }
    if (c.max_new_tokens() < 1 || c.max_new_tokens() > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat("choice ", c.choice(), ": max_new_tokens must be >= 1"));
    }
    if (c.sent().empty() && request.prompt().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("choice ", c.choice(), " has no first token to continue from"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

DecodeStream::DecodeStream(DecodeWorker& worker, DecodeCalls& calls,
                           grpc::CallbackServerContext* context, const v1::DecodeRequest* request)
    : worker_(worker), calls_(calls) {
  {
    const std::optional<TraceContext> parent = TraceFromMetadata(context->client_metadata());
    std::shared_ptr<const Tracer> tracer = GlobalTracer();
    absl::MutexLock lock(&mu_);
    span_ = tracer->StartSpan("yoco.decode.run", SpanKind::kServer,
                              parent.has_value() ? &*parent : nullptr);
    span_.SetAttribute("yoco.local_prefill", request->prompt_size() > 0);
    admission_ = tracer->StartSpan("yoco.decode.admission", SpanKind::kInternal, &span_.context());
  }
  if (absl::Status checked = CheckChoices(*request); !checked.ok()) {
    admission_done_ = events_done_ = true;
    FinishOnce(ToGrpcStatus(checked));
    return;
  }
  std::vector<DecodeChoiceCall> choices;
  for (const v1::DecodeChoice& c : request->choices()) {
    choices.push_back(
        {c.choice(), {c.sent().begin(), c.sent().end()}, static_cast<int>(c.max_new_tokens())});
  }
  {
    absl::MutexLock lock(&mu_);
    choices_left_ = unfinished_events_ = std::max<int>(1, request->choices_size());
    for (const v1::DecodeChoice& c : request->choices()) going_.insert(c.choice());
  }
  if (!request->choices().empty() && calls_.Add(request->call_id(), this)) {
    call_id_ = request->call_id();
  }
  // Validated with the rest of the sampling where it is used (a prefill, AdmitBundle).
  const SamplingParams sampling = FromProto(request->sampling());
  const int max_new_tokens = static_cast<int>(
      std::min<uint32_t>(request->max_new_tokens(), std::numeric_limits<int>::max()));
  auto on_event = [this](const DecodeEvent& e) { OnEvent(e); };
  auto on_admitted = [this](absl::StatusOr<uint64_t> id) { OnAdmitted(id); };
  if (request->prompt_size() > 0) {
    LocalPrefillCall call;
    call.prompt.assign(request->prompt().begin(), request->prompt().end());
    call.sampling = sampling;
    call.max_new_tokens = max_new_tokens;
    call.stop_at_eos = request->stop_at_eos();
    call.scheduling = FromProto(request->scheduling());
    call.generated_tail = request->generated_tokens();
    call.choices = std::move(choices);
    worker_.PrefillAndDecodeAsync(
        std::move(call), on_event, [this] { return cancelled_.load(); }, on_admitted);
    return;
  }
  ShippedDecodeCall call{.sender = request->sender_transport(),
                         .transfer_id = request->transfer_id(),
                         .max_new_tokens = max_new_tokens,
                         .stop_at_eos = request->stop_at_eos(),
                         .scheduling = FromProto(request->scheduling())};
  if (request->has_sampling()) {
    call.sampling = sampling;
    call.generated.assign(request->generated().begin(), request->generated().end());
    call.prompt_ids.assign(request->prompt_ids().begin(), request->prompt_ids().end());
  }
  call.choices = std::move(choices);
  if (request->wait_for_bundle_ms() > 0) {
    call.wait = absl::Milliseconds(request->wait_for_bundle_ms());
  }
  const uint64_t ticket = worker_.DecodeWhenArrived(call, on_event, on_admitted);
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (ticket != 0 && !admission_done_) {
      ticket_ = ticket;
      cancel = cancelled_.load();
    }
  }
  if (cancel) worker_.CancelWaiting(ticket);
}

void DecodeStream::OnAdmitted(const absl::StatusOr<uint64_t>& id) {
  {
    absl::MutexLock lock(&mu_);
    admission_.SetStatus(id.status());
    admission_.End();
  }
  if (!id.ok()) {
    FinishOnce(ToGrpcStatus(id.status()));
    EngineDone(/*admission=*/true, /*events=*/true);  // a refused sequence sends no events
    return;
  }
  if (*id == 0) {  // ended on its first token: its finished event came already
    EngineDone(/*admission=*/true, /*events=*/false);
    return;
  }
  bool cancel;
  std::vector<uint32_t> ended;  // by EndChoice before the sequence had an id
  {
    absl::MutexLock lock(&mu_);
    sequence_ = *id;
    ticket_ = 0;
    cancel = cancelled_.load() || finished_;
    for (uint32_t c : ended_) {
      if (going_.contains(c)) ended.push_back(c);
    }
  }
  if (cancel) worker_.Cancel(*id);
  for (uint32_t c : ended) worker_.CancelChoice(*id, c);
  EngineDone(/*admission=*/true, /*events=*/false);
}

bool DecodeStream::EndChoice(uint32_t choice) {
  uint64_t sequence;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || !going_.contains(choice) || !ended_.insert(choice).second) return false;
    sequence = sequence_;  // 0 until admitted: OnAdmitted cancels it then
  }
  if (sequence != 0) worker_.CancelChoice(sequence, choice);
  return true;
}

DecodeStream::~DecodeStream() {
  if (call_id_ != 0) calls_.Remove(call_id_, this);
}

void DecodeStream::OnEvent(const DecodeEvent& event) {
  bool all_finished = false;
  {
    absl::MutexLock lock(&mu_);
    if (!finished_) events_.push_back(event);
    if (!event.finished && !first_token_) {
      first_token_ = true;
      span_.AddEvent("first_token");
    }
    if (event.finished) {
      going_.erase(event.choice);
      output_tokens_ += event.generated;
      all_finished = --unfinished_events_ == 0;
      if (all_finished) span_.SetAttribute("gen_ai.usage.output_tokens", output_tokens_);
    }
  }
  Pump();
  if (all_finished) EngineDone(/*admission=*/false, /*events=*/true);
}

void DecodeStream::Pump() {
  absl::ReleasableMutexLock lock(&mu_);
  if (writing_ || finished_ || events_.empty()) return;
  const DecodeEvent e = events_.front();
  events_.pop_front();
  out_.Clear();
  if (e.finished) {
    if (e.reason == DecodeFinish::kError) {
      lock.Release();
      FinishOnce(ToGrpcStatus(e.status));
      return;
    }
    const bool ended_by_caller = e.reason == DecodeFinish::kCancelled && ended_.contains(e.choice);
    if (e.reason == DecodeFinish::kCancelled && !ended_by_caller) {
      // A cancel that was not an EndChoice: only this call cancels its sequence, and then
      // nobody reads this; should anything else ever cut it, the router must see a failure to
      // retry, never a finished stream.
      lock.Release();
      FinishOnce(grpc::Status(grpc::StatusCode::ABORTED, "the sequence was cancelled"));
      return;
    }
    out_.mutable_finish()->set_reason(ended_by_caller ? v1::FINISH_REASON_CANCELLED
                                                      : ToProto(e.reason));
    out_.mutable_finish()->mutable_usage()->set_generated_tokens(e.generated);
    out_.set_choice(e.choice);
    final_write_ = --choices_left_ == 0;
  } else {
    out_.set_choice(e.choice);
    out_.mutable_token()->set_choice(e.choice);
    out_.mutable_token()->set_id(e.token);
    out_.mutable_token()->set_index(index_++);
    if (e.logprobs.has_value()) {
      ToProto(*e.logprobs, out_.mutable_token()->mutable_logprob(),
              out_.mutable_token()->mutable_top_logprobs());
    }
  }
  writing_ = true;
  lock.Release();
  StartWrite(&out_);
}

void DecodeStream::OnWriteDone(bool ok) {
  bool final_write;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    final_write = final_write_;
  }
  if (!ok || cancelled_) {  // the client is gone
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed"));
    return;
  }
  if (final_write) {
    FinishOnce(grpc::Status::OK);
    return;
  }
  Pump();
}

void DecodeStream::OnCancel() {
  cancelled_ = true;
  uint64_t sequence, ticket;
  bool idle;
  {
    absl::MutexLock lock(&mu_);
    sequence = sequence_;
    ticket = ticket_;
    idle = !writing_;
  }
  if (sequence != 0) worker_.Cancel(sequence);
  if (ticket != 0) worker_.CancelWaiting(ticket);
  // A write in flight fails and finishes the call; otherwise finish now.
  if (idle) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
}

void DecodeStream::FinishOnce(const grpc::Status& status) {
  uint64_t sequence;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    events_.clear();
    sequence = sequence_;
    admission_.End();
    EndSpan(span_, status);
  }
  // A sequence still running has nobody to stream to.
  if (!status.ok() && sequence != 0) worker_.Cancel(sequence);
  Finish(status);
}

void DecodeStream::EngineDone(bool admission, bool events) {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    admission_done_ |= admission;
    events_done_ |= events;
    last = admission_done_ && events_done_ && done_;
  }
  if (last) delete this;
}

void DecodeStream::OnDone() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    last = admission_done_ && events_done_;
  }
  if (last) delete this;
}

}  // namespace yoco
