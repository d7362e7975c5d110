// TurnQueue: turns go in arrival order within a class and fairly across tenants, the bound
// refuses at once, a cancelled waiter leaves
// without disturbing the others.
#include "lib/threading/turn_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace yoco
