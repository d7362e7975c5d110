// TurnHandOver: long work on a TurnQueue's turn (a prefill, a pre-cache) steps aside between its
// blocks for the waiters that go before it (a higher priority, or another tenant whose share is
// behind), and stops once it has lost the turn. Without it a background pre-cache of a long
// document would hold every request on that worker until it ended, and one tenant's long document
// would hold up another's short prompts.
//
// Work near its end finishes before another tenant of its priority: handing over there would save
// the other a block's wait and cost this work the other's whole prefill, so two tenants' short
// prompts would trade places mid-prompt (the one that found the engine idle waiting for the one
// that came after it) for nothing.
#ifndef YOCO_LIB_THREADING_TURN_HAND_OVER_H_
#define YOCO_LIB_THREADING_TURN_HAND_OVER_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "lib/scheduling/scheduling_class.h"
#include "lib/threading/turn_queue.h"

namespace yoco {

// Used by the thread that holds the turn; the turn must outlive it.
class TurnHandOver {
 public:
  // Shares the turn with other tenants of its priority while more than `finish_within` tokens
  // are left.
  TurnHandOver(TurnQueue::Turn& turn, std::function<bool()> cancelled, SchedulingClass mine,
               int64_t finish_within)
      : turn_(turn),
        cancelled_(std::move(cancelled)),
        mine_(std::move(mine)),
        finish_within_(finish_within) {}
  TurnHandOver(const TurnHandOver&) = delete;
  TurnHandOver& operator=(const TurnHandOver&) = delete;

  // The work's cancellation poll: the caller's, or the turn lost while handed over.
  std::function<bool()> cancelled() const {
    return [this] { return !turn_.ok() || (cancelled_ && cancelled_()); };
  }
  // At a block boundary, `tokens_left` to go: waiters that go before this work go first, then it
  // goes on.
  void BetweenBlocks(int64_t tokens_left) {
    if (!turn_.ok()) return;
    turn_.YieldToWaitersAhead(cancelled_, mine_, tokens_left > finish_within_).IgnoreError();
  }
  // Not OK once the turn was lost (cancelled while waiting to get it back).
  const absl::Status& status() const { return turn_.status(); }

 private:
  TurnQueue::Turn& turn_;
  const std::function<bool()> cancelled_;
  const SchedulingClass mine_;
  const int64_t finish_within_;
};

}  // namespace yoco

#endif  // YOCO_LIB_THREADING_TURN_HAND_OVER_H_
