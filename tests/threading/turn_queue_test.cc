// TurnQueue: turns go in arrival order within a class and fairly across tenants, the bound
// refuses at once, a cancelled waiter leaves
// without disturbing the others.
#include "lib/threading/turn_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace yoco {
namespace {

void WaitUntil(const std::function<bool()>& done) {
  for (int i = 0; i < 2000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done());
}

TEST(TurnQueueTest, TurnsGoInArrivalOrder) {
  TurnQueue queue(16);
  std::vector<int> order;
  std::mutex mu;
  std::vector<std::thread> threads;
  {
    TurnQueue::Turn first = queue.Acquire();
    ASSERT_TRUE(first.ok());
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        TurnQueue::Turn turn = queue.Acquire();
        ASSERT_TRUE(turn.ok());
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      });
      WaitUntil([&] { return queue.waiting() == static_cast<size_t>(i + 1); });
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(queue.busy());
}

// Tenant a queues four, then b one: b's goes second (FairOrder), not after a's backlog.
TEST(TurnQueueTest, AnotherTenantsRequestDoesNotWaitBehindABacklog) {
  TurnQueue queue(16);
  std::vector<std::string> order;
  std::mutex mu;
  std::vector<std::thread> threads;
  const std::vector<std::string> tenants = {"a", "a", "a", "a", "b"};
  {
    TurnQueue::Turn first = queue.Acquire();
    ASSERT_TRUE(first.ok());
    for (size_t i = 0; i < tenants.size(); ++i) {
      threads.emplace_back([&, i] {
        TurnQueue::Turn turn = queue.Acquire(nullptr, {.tenant = tenants[i]});
        ASSERT_TRUE(turn.ok());
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(tenants[i] + std::to_string(i));
      });
      WaitUntil([&] { return queue.waiting() == i + 1; });
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"a0", "b4", "a1", "a2", "a3"}));
}

TEST(TurnQueueTest, BeyondTheBoundIsRefusedAtOnce) {
  TurnQueue queue(2);
  TurnQueue::Turn holder = queue.Acquire();
  std::thread a([&] { EXPECT_TRUE(queue.Acquire().ok()); });
  std::thread b([&] { EXPECT_TRUE(queue.Acquire().ok()); });
  WaitUntil([&] { return queue.waiting() == 2; });
  EXPECT_TRUE(queue.full());
  TurnQueue::Turn refused = queue.Acquire();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.refused(), 1u);
  { TurnQueue::Turn done = std::move(holder); }  // released
  a.join();
  b.join();
  EXPECT_TRUE(queue.Acquire().ok());
}

// The bound full of one tenant's waiters: another tenant's caller takes the place of the
// flood's newest waiter (refused), not refused itself; once tenants wait evenly, the next caller
// of either is refused.
TEST(TurnQueueTest, AFullQueueMakesRoomForATenantWithFewerWaiting) {
  TurnQueue queue(3);
  TurnQueue::Turn holder = queue.Acquire(nullptr, {.tenant = "flood"});
  // Waiters give up (CANCELLED) rather than hang when nobody is refused in their place.
  const absl::Time give_up_at = absl::Now() + absl::Seconds(10);
  auto give_up = [&] { return absl::Now() > give_up_at; };
  std::vector<absl::StatusCode> flood(3);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back(
        [&, i] { flood[i] = queue.Acquire(give_up, {.tenant = "flood"}).status().code(); });
    WaitUntil([&] { return queue.waiting() == static_cast<size_t>(i + 1); });
  }
  absl::StatusCode quiet = absl::StatusCode::kUnknown;
  std::thread quiet_waiter(
      [&] { quiet = queue.Acquire(give_up, {.tenant = "quiet"}).status().code(); });
  waiters.back().join();  // the newest flood waiter gave its place up
  EXPECT_EQ(flood[2], absl::StatusCode::kResourceExhausted);
  WaitUntil([&] { return queue.waiting() == 3; });
  // flood 2, quiet 1: neither may push the other out.
  EXPECT_EQ(queue.Acquire(give_up, {.tenant = "flood"}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.Acquire(give_up, {.tenant = "quiet"}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.refused(), 3u);
  { TurnQueue::Turn done = std::move(holder); }  // released
  waiters[0].join();
  waiters[1].join();
  quiet_waiter.join();
  EXPECT_EQ(flood[0], absl::StatusCode::kOk);
  EXPECT_EQ(flood[1], absl::StatusCode::kOk);
  EXPECT_EQ(quiet, absl::StatusCode::kOk);
}

TEST(TurnQueueTest, ACancelledWaiterLeavesAndTheNextStillGetsItsTurn) {
  TurnQueue queue(4);
  std::atomic<bool> cancel{false}, second_got_it{false};
  auto holder = std::make_unique<TurnQueue::Turn>(queue.Acquire());
  std::thread first([&] {
    EXPECT_EQ(queue.Acquire([&] { return cancel.load(); }).status().code(),
              absl::StatusCode::kCancelled);
  });
  WaitUntil([&] { return queue.waiting() == 1; });
  std::thread second([&] {
    EXPECT_TRUE(queue.Acquire().ok());
    second_got_it = true;
  });
  WaitUntil([&] { return queue.waiting() == 2; });
  cancel = true;
  first.join();
  EXPECT_EQ(queue.waiting(), 1u);
  holder.reset();
  second.join();
  EXPECT_TRUE(second_got_it);
}

// Background work (priority 5) holds the turn; a request of its tenant at the same priority
// and one at priority 0 wait. Between blocks the work hands the turn to priority 0 only, then
// takes it back before the later request of its own priority.
TEST(TurnQueueTest, LongWorkHandsItsTurnToAHigherPriorityBetweenBlocks) {
  TurnQueue queue(8);
  const SchedulingClass background{.tenant = "a", .priority = 5};
  std::vector<std::string> order;
  std::mutex mu;
  auto note = [&](const std::string& who) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(who);
  };
  TurnQueue::Turn work = queue.Acquire(nullptr, background);
  ASSERT_TRUE(work.ok());
  std::thread later([&] {
    TurnQueue::Turn turn = queue.Acquire(nullptr, background);
    ASSERT_TRUE(turn.ok());
    note("later");
  });
  WaitUntil([&] { return queue.waiting() == 1; });
  // Only the same priority waits: nothing to hand over.
  ASSERT_TRUE(work.YieldToWaitersAhead(nullptr, background).ok());
  EXPECT_EQ(queue.yields(), 0u);
  std::thread urgent([&] {
    TurnQueue::Turn turn = queue.Acquire(nullptr, {.tenant = "b", .priority = 0});
    ASSERT_TRUE(turn.ok());
    note("urgent");  // while holding the turn
  });
  WaitUntil([&] { return queue.waiting() == 2; });
  ASSERT_TRUE(work.YieldToWaitersAhead(nullptr, background).ok());
  note("work again");
  EXPECT_EQ(queue.yields(), 1u);
  { TurnQueue::Turn done = std::move(work); }  // released
  urgent.join();
  later.join();
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "work again", "later"}));
  EXPECT_FALSE(queue.busy());
}

// At one priority, long work of tenant a and requests of tenant b take the turn block by block:
// each block boundary hands it to the b request waiting then, and a takes it back after it.
TEST(TurnQueueTest, LongWorkTakesTurnsWithAnotherTenantBetweenBlocks) {
  TurnQueue queue(8);
  const SchedulingClass a{.tenant = "a"};
  std::vector<std::string> order;
  std::mutex mu;
  auto note = [&](const std::string& who) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(who);
  };
  TurnQueue::Turn work = queue.Acquire(nullptr, a);
  ASSERT_TRUE(work.ok());
  for (int block = 1; block <= 2; ++block) {
    std::thread request([&, block] {
      // Gives up rather than hangs when the work never hands the turn over.
      const absl::Time give_up = absl::Now() + absl::Seconds(10);
      TurnQueue::Turn turn = queue.Acquire([&] { return absl::Now() > give_up; }, {.tenant = "b"});
      ASSERT_TRUE(turn.ok());
      note(absl::StrCat("b", block));
    });
    WaitUntil([&] { return queue.waiting() == 1; });
    ASSERT_TRUE(work.YieldToWaitersAhead(nullptr, a).ok());
    note(absl::StrCat("a", block));
    request.join();
  }
  EXPECT_EQ(queue.yields(), 2u);
  // Nobody waits: the work goes on.
  ASSERT_TRUE(work.YieldToWaitersAhead(nullptr, a).ok());
  EXPECT_EQ(queue.yields(), 2u);
  EXPECT_EQ(order, (std::vector<std::string>{"b1", "a1", "b2", "a2"}));
}

// Cancelled while waiting to get its turn back: the work no longer holds it, and the turn it
// handed over is released once, to the next in line.
TEST(TurnQueueTest, WorkCancelledWhileHandedOverLosesTheTurnOnce) {
  TurnQueue queue(8);
  const SchedulingClass background{.priority = 5};
  std::atomic<bool> cancel{false}, release_urgent{false};
  auto work = std::make_unique<TurnQueue::Turn>(queue.Acquire(nullptr, background));
  std::thread urgent([&] {
    TurnQueue::Turn turn = queue.Acquire(nullptr, {.priority = 0});
    ASSERT_TRUE(turn.ok());
    WaitUntil([&] { return release_urgent.load(); });
  });
  WaitUntil([&] { return queue.waiting() == 1; });
  std::thread yielder([&] {
    EXPECT_EQ(work->YieldToWaitersAhead([&] { return cancel.load(); }, background).code(),
              absl::StatusCode::kCancelled);
  });
  WaitUntil([&] { return queue.waiting() == 1 && queue.busy() && queue.yields() == 1; });
  cancel = true;
  yielder.join();
  EXPECT_EQ(queue.waiting(), 0u);
  work.reset();  // releases nothing: the urgent caller holds the turn
  EXPECT_TRUE(queue.busy());
  release_urgent = true;
  urgent.join();
  EXPECT_FALSE(queue.busy());
  EXPECT_TRUE(queue.Acquire().ok());
}

}  // namespace
}  // namespace yoco
