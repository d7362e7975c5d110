// The retry rules. Their order matters: the client's own deadline or cancellation is checked
// before anything that would blame a worker, and a refusal for load never marks a worker failed.
#include "services/router/failover.h"

#include <chrono>

namespace yoco {
namespace {

using Next = Failover::Next;

// Statuses that say a worker (or the way to it) failed, so another pair may succeed. CANCELLED
// is one when the client is still there (checked first): the router did not cancel the call, so
// the worker did — a gRPC server shutting down (SIGTERM, a rollout) cancels calls that arrive
// while it drains.
bool RetryableStatus(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::ABORTED || code == grpc::StatusCode::INTERNAL ||
         code == grpc::StatusCode::UNKNOWN || code == grpc::StatusCode::CANCELLED;
}

Failover PrefillFailed(const AttemptEnd& end) {
  Failover f;
  if (end.client_gone) {
    f.next = Next::kEndClientGone;
  } else if (end.decode_blamed) {
    // The prompt was prefilled but its state could not reach the decode worker (dead before
    // the probes noticed): that worker failed; the same prefill worker may serve the retry.
    f.next = Next::kRetry;
    f.mark_failed = WorkerRole::kDecode;
  } else if (end.code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // A full queue (the prefill worker's, or the decode worker's refusing the bundle) is load:
    // another pair, both stay healthy; once every pair has refused, the request waits for room.
    f.next = Next::kReplan;
    f.busy_prefill = f.busy_decode = true;
  } else if (!RetryableStatus(end.code)) {
    f.next = Next::kFail;
  } else {
    f.next = Next::kRetry;
    f.mark_failed = WorkerRole::kPrefill;
  }
  return f;
}

Failover DecodeEnded(const AttemptEnd& end) {
  Failover f;
  const bool failed = end.code != grpc::StatusCode::OK;
  if (end.finished) {
    f.next = Next::kComplete;
  } else if (end.client_gone) {
    f.next = Next::kEndClientGone;
  } else if (end.stalled) {
    // Stopped sending (failed its health probe, or no token long past its pace): as if it had
    // died, the tokens sent so far go on from another pair.
    f.next = Next::kRetry;
    f.mark_failed = WorkerRole::kDecode;
  } else if (end.local && (end.code == grpc::StatusCode::FAILED_PRECONDITION ||
                           end.code == grpc::StatusCode::RESOURCE_EXHAUSTED)) {
    // It does not prefill (any more), or its prefill queue is full: a prefill worker's turn.
    f.next = Next::kRetry;
    f.force_remote = true;
  } else if (end.code == grpc::StatusCode::FAILED_PRECONDITION) {
    // Its whole state budget is smaller than the sequence: another decode worker may hold it.
    f.next = Next::kReplan;
    f.skip_decode = true;
  } else if (end.code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // Its batch and queue are full: load, not failure.
    f.next = Next::kReplan;
    f.busy_decode = true;
  } else if (failed && !RetryableStatus(end.code)) {
    f.next = Next::kFail;
  } else {
    // Failed, or ended without a finish (the worker went away): the tokens sent so far go on
    // from another pair.
    f.next = Next::kRetry;
    f.mark_failed = WorkerRole::kDecode;
  }
  return f;
}

}  // namespace

Failover DecideFailover(const AttemptEnd& end) {
  return end.call == WorkerRole::kPrefill ? PrefillFailed(end) : DecodeEnded(end);
}

void AvoidedWorkers::Note(const Failover& f, std::optional<size_t> prefill, size_t decode) {
  if (f.mark_failed == WorkerRole::kPrefill && prefill.has_value()) {
    failed_prefill.push_back(*prefill);
  }
  if (f.mark_failed == WorkerRole::kDecode) failed_decode.push_back(decode);
  if (f.skip_decode) unfit_decode.push_back(decode);
  if (f.busy_prefill && prefill.has_value()) busy_prefill.push_back(*prefill);
  if (f.busy_decode) busy_decode.push_back(decode);
  if (f.force_remote) force_remote = true;
}

std::vector<size_t> AvoidedWorkers::SkipPrefill() const {
  std::vector<size_t> out = failed_prefill;
  out.insert(out.end(), busy_prefill.begin(), busy_prefill.end());
  return out;
}

std::vector<size_t> AvoidedWorkers::SkipDecode() const {
  std::vector<size_t> out = failed_decode;
  out.insert(out.end(), unfit_decode.begin(), unfit_decode.end());
  out.insert(out.end(), busy_decode.begin(), busy_decode.end());
  return out;
}

grpc::Status AttemptError(const AttemptEnd& end, const grpc::Status& status) {
  if (end.stalled) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the decode worker stalled");
  if (status.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode stream ended early");
  return status;
}

bool ClientGone(const grpc::ServerContextBase& context) {
  return context.IsCancelled() || std::chrono::system_clock::now() >= context.deadline();
}

bool FailureIsTheClients(grpc::StatusCode code, bool cancelled,
                         std::chrono::system_clock::time_point now,
                         std::chrono::system_clock::time_point deadline) {
  if (cancelled || now >= deadline) return true;
  const bool ended_by_propagation =
      code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::DEADLINE_EXCEEDED;
  return ended_by_propagation && now + kDeadlineSlack >= deadline;
}

bool FailureIsTheClients(grpc::StatusCode code, const grpc::ServerContextBase& context) {
  return FailureIsTheClients(code, context.IsCancelled(), std::chrono::system_clock::now(),
                             context.deadline());
}

grpc::Status ClientGoneStatus(const grpc::ServerContextBase& context, const grpc::Status& worker) {
  if (std::chrono::system_clock::now() + kDeadlineSlack >= context.deadline()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the request's deadline passed (" + worker.error_message() + ")");
  }
  return ClientCancelledStatus();
}

grpc::Status ClientCancelledStatus() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
}

}  // namespace yoco
