// The pair search's steps. Like the rest of the Generate chain each runs on a gRPC callback
// thread (or the load queue's waker) and must not block; `end_op` comes last in a step, since
// the stream, and this search with it, may be gone after it.
#include "services/router/pair_search.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "lib/log/log.h"
#include "lib/rpc/grpc_status.h"

namespace yoco {
namespace {

// How often a request that found no healthy pair looks again (within wait_for_workers).
constexpr auto kWorkerWaitPoll = std::chrono::milliseconds(100);

}  // namespace

PairSearch::PairSearch(WorkerPool& pool, grpc::CallbackServerContext& context, InFlightOps& ops,
                       RequestTrace& trace, Callbacks callbacks)
    : pool_(pool),
      context_(context),
      ops_(ops),
      trace_(trace),
      callbacks_(std::move(callbacks)),
      load_wait_until_(std::min(context.deadline(),
                                std::chrono::system_clock::now() +
                                    absl::ToChronoMilliseconds(pool.options().max_load_wait))),
      room_(pool.load_queue(), [this](bool turn) { OnRoom(turn); }) {}

void PairSearch::Start(const PairRequest& want, const SchedulingClass& scheduling,
                       const grpc::Status& if_none) {
  want_ = want;
  scheduling_ = scheduling;
  if_none_ = if_none;
  workers_wait_until_ = std::min(context_.deadline(),
                                 std::chrono::system_clock::now() +
                                     absl::ToChronoMilliseconds(pool_.options().wait_for_workers));
  // While others wait for room, a new request queues behind them in their order and the first
  // in line tries now. Trying the workers at once instead would take the place a waiter was
  // woken for: a flooding tenant's next request, sent as its last one ends, took it again and
  // again, and another tenant's request waited seconds at the head of the queue. Only a
  // newcomer wakes the first in line: a later attempt (after a refusal) that did so would wake
  // one that is refused in turn and wakes the next, a loop of refusals at RPC speed.
  const bool newcomer = !started_;
  started_ = true;
  LoadWaitQueue& queue = pool_.load_queue();
  if (newcomer && queue.waiting() > 0) {
    WaitForRoom();
    queue.WakeNext();  // (this search may be gone by now)
    return;
  }
  Choose();
}

void PairSearch::Choose() {
  wait_ = Wait::kNone;
  want_.skip_prefill = avoided_.SkipPrefill();
  want_.skip_decode = avoided_.SkipDecode();
  want_.allow_local = !avoided_.force_remote;
  const WorkerPair pair = pool_.ChoosePair(want_);
  if (pair.usable()) {
    callbacks_.found(pair);
  } else if (avoided_.any_busy()) {  // refused for load, not failed
    WaitForRoom();
  } else if (ClientGone(context_)) {  // (the choice takes a while when it probes every worker)
    callbacks_.ended(ClientGoneStatus(context_, if_none_));
  } else if (std::chrono::system_clock::now() < workers_wait_until_) {
    // No healthy pair (yet): workers restart (a rollout, a crash Kubernetes restarts) or come
    // up, or the other role's worker of this model version is about to be seen healthy. A
    // request that lost its worker waits too (failing it would lose it while a replacement
    // starts), and from now on avoids only what the probes find unhealthy: a restarted worker
    // may serve it.
    avoided_.ForgetFailed();
    WaitForWorkers();
  } else {
    callbacks_.ended(if_none_);
  }
}

void PairSearch::WaitForWorkers() {
  wait_ = Wait::kWorkers;
  trace_.NoteWait("workers");
  grpc::Alarm* alarm = ops_.Keep(std::make_unique<grpc::Alarm>());
  if (ops_.cancelled()) {
    callbacks_.ended(ClientCancelledStatus());
    callbacks_.end_op();  // the alarm is never set
    return;
  }
  alarm->Set(std::chrono::system_clock::now() + kWorkerWaitPoll, [this](bool) {
    if (context_.IsCancelled()) {
      callbacks_.ended(ClientCancelledStatus());
    } else if (Waiting(Wait::kWorkers)) {
      Choose();
    }
    callbacks_.end_op();
  });
}

void PairSearch::WaitForRoom() {
  if (context_.IsCancelled()) {
    callbacks_.ended(ClientGoneStatus(context_, if_none_));
    return;
  }
  if (std::chrono::system_clock::now() >= load_wait_until_) {
    callbacks_.ended(if_none_);  // the workers' refusal
    return;
  }
  wait_ = Wait::kRoom;
  trace_.NoteWait("room");
  const bool first_wait = !room_.waited();
  ops_.Begin();  // the queue's: OnRoom ends it
  ops_.Begin();  // this function's: OnRoom may run on another thread before Wait returns
  // A refusal to queue runs no OnRoom.
  if (absl::Status queued = room_.Wait(scheduling_); !queued.ok()) {
    callbacks_.ended(ToGrpcStatus(queued));
    callbacks_.end_op();
  } else if (first_wait) {
    pool_.metrics().load_waits.Increment();
  }
  callbacks_.end_op();
}

void PairSearch::OnRoom(bool turn) {
  if (context_.IsCancelled()) {
    callbacks_.ended(ClientGoneStatus(context_, if_none_));
  } else if (!turn) {
    callbacks_.ended(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "every worker is at its queue bound and the router's wait queue is full: "
                     "this request gave its place to another tenant's; retry later"));
  } else if (Waiting(Wait::kRoom)) {
    avoided_.busy_prefill.clear();
    avoided_.busy_decode.clear();
    Choose();
  }
  callbacks_.end_op();
}

void PairSearch::AttemptEnded(const WorkerPair& pair, const Failover& f) {
  const std::optional<size_t> prefill =
      pair.prefill.has_value() && !pair.local ? std::optional(pair.prefill->index) : std::nullopt;
  if (f.mark_failed == WorkerRole::kPrefill) pool_.MarkFailed(WorkerRole::kPrefill, *prefill);
  if (f.mark_failed == WorkerRole::kDecode) {
    pool_.MarkFailed(WorkerRole::kDecode, pair.decode->index);
  }
  avoided_.Note(f, prefill, pair.decode->index);
}

bool PairSearch::Waiting(Wait expected) {
  if (wait_ == expected) return true;
  LogError("a request's pair search woke in the wrong wait")
      .With("expected", static_cast<int>(expected))
      .With("wait", static_cast<int>(wait_));
  callbacks_.ended(
      grpc::Status(grpc::StatusCode::INTERNAL, "the router lost track of this request"));
  return false;
}

}  // namespace yoco
