// TurnQueue: one caller at a time holds the turn (a prefill worker's engine); the others wait
// in FairOrder (priority, then tenants by weight, then arrival), at most `max_waiting` of them. One
// more is refused at once with RESOURCE_EXHAUSTED, which the router reads as "try another worker",
// instead of queueing without bound behind a plain mutex (unordered, so an unlucky request could
// wait forever) — unless another tenant waits with at least two more than the caller's, whose
// newest waiter is then refused in its place. A waiter whose call is cancelled (or whose deadline
// passes) leaves the queue.
#ifndef YOCO_LIB_THREADING_TURN_QUEUE_H_
#define YOCO_LIB_THREADING_TURN_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/scheduling/fair_order.h"

namespace yoco {

class TurnQueue {
 public:
  explicit TurnQueue(size_t max_waiting) : max_waiting_(max_waiting) {}
  TurnQueue(const TurnQueue&) = delete;
  TurnQueue& operator=(const TurnQueue&) = delete;

  // Held while alive (when `ok()`).
  class Turn {
   public:
    Turn(Turn&& other) noexcept
        : queue_(other.queue_), ticket_(other.ticket_), status_(std::move(other.status_)) {
      other.queue_ = nullptr;
    }
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (queue_ != nullptr) queue_->Release();
    }
    bool ok() const { return status_.ok(); }
    const absl::Status& status() const { return status_; }

    // Between steps of long work held as `mine`: when a waiter goes before it (a higher priority,
    // or with `within_priority` another tenant of its priority whose share is behind;
    // FairOrder::AnyBefore), hands it the turn and waits to take it back. So a background
    // pre-cache holds up a request by one step, not by the whole document, and a tenant's long
    // document takes turns with another tenant's requests step by step. It waits with its first
    // ticket, so it keeps its place before its own tenant's later requests. Not OK (cancelled
    // while waiting): the turn is no longer held and the caller stops.
    absl::Status YieldToWaitersAhead(const std::function<bool()>& cancelled,
                                     const SchedulingClass& mine, bool within_priority = true) {
      if (queue_ == nullptr) return status_;
      status_ = queue_->Yield(ticket_, cancelled, mine, within_priority);
      if (!status_.ok()) queue_ = nullptr;  // no longer held: ok() says so too
      return status_;
    }

   private:
    friend class TurnQueue;
    Turn(TurnQueue* queue, uint64_t ticket, absl::Status status)
        : queue_(queue), ticket_(ticket), status_(std::move(status)) {}
    TurnQueue* queue_;  // null: nothing to release
    uint64_t ticket_;   // its place in line (FairOrder id)
    absl::Status status_;
  };

  // Waits for the turn, queued as `scheduling`. `cancelled` (may be empty) is polled while
  // waiting; true leaves the queue with CANCELLED.
  Turn Acquire(const std::function<bool()>& cancelled = nullptr,
               const SchedulingClass& scheduling = {}) {
    absl::MutexLock lock(&mu_);
    const uint64_t ticket = next_ticket_++;
    if (!busy_ && waiting_.empty()) {
      busy_ = true;
      return Turn(this, ticket, absl::OkStatus());
    }
    if (waiting_.size() >= max_waiting_ && !DisplaceForLocked(scheduling.tenant)) {
      ++refused_;
      return Turn(
          nullptr, ticket,
          absl::ResourceExhaustedError(absl::StrCat(waiting_.size(),
                                                    " requests already wait for this worker's "
                                                    "engine (its bound); try another worker")));
    }
    waiting_.Add(ticket, scheduling);
    absl::Status st = AwaitTurn(ticket, cancelled);
    TurnQueue* holder = st.ok() ? this : nullptr;  // before `st` is moved from
    return Turn(holder, ticket, std::move(st));
  }

  size_t waiting() const {
    absl::MutexLock lock(&mu_);
    return waiting_.size();
  }
  bool busy() const {
    absl::MutexLock lock(&mu_);
    return busy_;
  }
  // Whether one more caller would be refused.
  bool full() const {
    absl::MutexLock lock(&mu_);
    return waiting_.size() >= max_waiting_;
  }
  uint64_t refused() const {
    absl::MutexLock lock(&mu_);
    return refused_;
  }
  // Turns handed over mid-work (Turn::YieldToWaitersAhead).
  uint64_t yields() const {
    absl::MutexLock lock(&mu_);
    return yields_;
  }

 private:
  // The queue is full and a caller of `tenant` comes: when another tenant waits with at least
  // two more, its newest waiter gives its place up (RESOURCE_EXHAUSTED: the router queues it
  // again in its own fair order) and true. Otherwise one tenant's flood, once it fills the
  // bound, would keep every other tenant out of the queue whose order is meant to be fair. A
  // holder that handed its turn over mid-work keeps its place (its work is half done).
  bool DisplaceForLocked(const std::string& tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::map<std::string, size_t> counts = waiting_.CountsByTenant();
    auto busiest = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    auto mine = counts.find(tenant);
    const size_t my_count = mine == counts.end() ? 0 : mine->second;
    if (busiest == counts.end() || busiest->second <= my_count + 1) return false;
    const uint64_t newest = *waiting_.Newest(busiest->first);
    if (handed_over_.contains(newest)) return false;
    waiting_.Remove(newest);
    displaced_.insert(newest);
    ++refused_;
    cv_.SignalAll();
    return true;
  }

  // Waits until the queued `ticket` is first in line with the turn free, then takes it.
  absl::Status AwaitTurn(uint64_t ticket, const std::function<bool()>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (busy_ || waiting_.Peek() != ticket) {
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
      if (displaced_.erase(ticket) > 0) {
        return absl::ResourceExhaustedError(
            "this worker's engine queue is full and this request gave its place to a tenant "
            "with fewer waiting; try another worker");
      }
      if (cancelled && cancelled() && (busy_ || waiting_.Peek() != ticket)) {
        waiting_.Remove(ticket);
        cv_.SignalAll();  // the next in line may be first now
        return absl::CancelledError("cancelled while waiting for the engine");
      }
    }
    waiting_.Pop();
    busy_ = true;
    return absl::OkStatus();
  }

  // The turn's holder steps aside for those ahead of it (Turn::YieldToWaitersAhead): it
  // queues again in the same critical section that frees the turn, so only those ahead of it
  // can take the turn meanwhile. Its place is not bounded by max_waiting: it held the turn.
  absl::Status Yield(uint64_t ticket, const std::function<bool()>& cancelled,
                     const SchedulingClass& mine, bool within_priority) {
    absl::MutexLock lock(&mu_);
    if (!waiting_.AnyBefore(mine, within_priority)) return absl::OkStatus();
    busy_ = false;
    ++yields_;
    waiting_.AddHolder(ticket, mine);
    handed_over_.insert(ticket);
    cv_.SignalAll();
    absl::Status back = AwaitTurn(ticket, cancelled);
    handed_over_.erase(ticket);
    return back;
  }

  void Release() {
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
    }
    cv_.SignalAll();
  }
  const size_t max_waiting_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  FairOrder waiting_ ABSL_GUARDED_BY(mu_);  // tickets
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t yields_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> handed_over_ ABSL_GUARDED_BY(mu_);  // holders queued again
  std::set<uint64_t> displaced_ ABSL_GUARDED_BY(mu_);    // gave their places up
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_TURN_QUEUE_H_
