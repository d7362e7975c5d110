// TurnQueue: one caller at a time holds the turn (a prefill worker's engine); the others wait
// in FairOrder (priority, then tenants by weight, then arrival), at most `max_waiting` of them. One
// more is refused at once with RESOURCE_EXHAUSTED, which the router reads as "try another worker",
// instead of queueing without bound behind a plain mutex (unordered, so an unlucky request could
// wait forever). A waiter whose call is cancelled (or whose deadline passes) leaves the queue.
#ifndef YOCO_LIB_THREADING_TURN_QUEUE_H_
#define YOCO_LIB_THREADING_TURN_QUEUE_H_

#include <cstdint>
#include <functional>

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
    Turn(Turn&& other) noexcept : queue_(other.queue_), status_(std::move(other.status_)) {
      other.queue_ = nullptr;
    }
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (queue_ != nullptr) queue_->Release();
    }
    bool ok() const { return status_.ok(); }
    const absl::Status& status() const { return status_; }

   private:
    friend class TurnQueue;
    Turn(TurnQueue* queue, absl::Status status) : queue_(queue), status_(std::move(status)) {}
    TurnQueue* queue_;  // null: nothing to release
    absl::Status status_;
  };

  // Waits for the turn, queued as `scheduling`. `cancelled` (may be empty) is polled while
  // waiting; true leaves the queue with CANCELLED.
  Turn Acquire(const std::function<bool()>& cancelled = nullptr,
               const SchedulingClass& scheduling = {}) {
    absl::MutexLock lock(&mu_);
    if (!busy_ && waiting_.empty()) {
      busy_ = true;
      return Turn(this, absl::OkStatus());
    }
    if (waiting_.size() >= max_waiting_) {
      ++refused_;
      return Turn(nullptr, absl::ResourceExhaustedError(
                               absl::StrCat(waiting_.size(),
                                            " requests already wait for this worker's "
                                            "engine (its bound); try another worker")));
    }
    const uint64_t ticket = next_ticket_++;
    waiting_.Add(ticket, scheduling);
    while (busy_ || waiting_.Peek() != ticket) {
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
      if (cancelled && cancelled() && (busy_ || waiting_.Peek() != ticket)) {
        waiting_.Remove(ticket);
        cv_.SignalAll();  // the next in line may be first now
        return Turn(nullptr, absl::CancelledError("cancelled while waiting for the engine"));
      }
    }
    waiting_.Pop();
    busy_ = true;
    return Turn(this, absl::OkStatus());
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

 private:
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
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_TURN_QUEUE_H_
