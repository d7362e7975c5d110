// LoadWaitQueue: arrival order within a tenant, turns across tenants (by priority and weight),
// the bound, and a full queue making room for a tenant with fewer waiters.
#include "lib/routing/load_wait_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace yoco {
namespace {

// Records which waiters were woken, and how.
struct Log {
  std::vector<std::string> events;
  LoadWaitQueue::Wake Waiter(const std::string& name) {
    return [this, name](bool turn) { events.push_back(name + (turn ? "" : ":shed")); };
  }
};

TEST(LoadWaitQueueTest, OneTenantIsServedInArrivalOrder) {
  LoadWaitQueue queue(8);
  Log log;
  for (const char* name : {"a1", "a2", "a3"})
    ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter(name)).ok());
  EXPECT_EQ(queue.waiting(), 3u);
  queue.WakeNext();
  EXPECT_EQ(log.events, std::vector<std::string>({"a1"}));
  queue.WakeNext(5);
  EXPECT_EQ(log.events, std::vector<std::string>({"a1", "a2", "a3"}));
  EXPECT_EQ(queue.waiting(), 0u);
  queue.WakeNext();  // nobody: nothing happens
  EXPECT_EQ(log.events.size(), 3u);
}

TEST(LoadWaitQueueTest, TenantsTakeTurns) {
  LoadWaitQueue queue(16);
  Log log;
  // A burst of tenant a, then one request each of b and c.
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(queue.Push({.tenant = "b"}, log.Waiter("b1")).ok());
  ASSERT_TRUE(queue.Push({.tenant = "c"}, log.Waiter("c1")).ok());
  queue.WakeNext(6);
  EXPECT_EQ(log.events, std::vector<std::string>({"a1", "b1", "c1", "a2", "a3", "a4"}));
}

// As at the workers: a lower priority value is woken first, and within a priority a tenant of
// weight 3 gets three turns to weight 1's one.
TEST(LoadWaitQueueTest, PrioritiesAndWeightsOrderTheWakes) {
  LoadWaitQueue queue(16);
  Log log;
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(queue.Push({.tenant = "a", .weight = 3}, log.Waiter("a")).ok());
    ASSERT_TRUE(queue.Push({.tenant = "b"}, log.Waiter("b")).ok());
  }
  ASSERT_TRUE(queue.Push({.tenant = "c", .priority = -1}, log.Waiter("c")).ok());
  queue.WakeNext();
  EXPECT_EQ(log.events, std::vector<std::string>({"c"}));
  queue.WakeNext(8);
  EXPECT_EQ(std::count(log.events.begin(), log.events.end(), "a"), 6);
  EXPECT_EQ(std::count(log.events.begin(), log.events.end(), "b"), 2);
}

TEST(LoadWaitQueueTest, AWaiterThatFoundNoRoomKeepsItsTurn) {
  LoadWaitQueue queue(8);
  Log log;
  auto first = queue.Push({.tenant = "a"}, log.Waiter("a1"));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a2")).ok());
  queue.WakeNext();
  ASSERT_EQ(log.events, std::vector<std::string>({"a1"}));
  // a1 found every worker full again: it waits with its old place, ahead of a2.
  ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a1-again"), *first).ok());
  queue.WakeNext();
  EXPECT_EQ(log.events.back(), "a1-again");
}

TEST(LoadWaitQueueTest, RemovedWaitersAreNeverWoken) {
  LoadWaitQueue queue(8);
  Log log;
  auto a1 = queue.Push({.tenant = "a"}, log.Waiter("a1"));
  ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a2")).ok());
  ASSERT_TRUE(a1.ok());
  EXPECT_TRUE(queue.Remove(*a1));
  EXPECT_FALSE(queue.Remove(*a1));
  queue.WakeNext(2);
  EXPECT_EQ(log.events, std::vector<std::string>({"a2"}));
  EXPECT_FALSE(queue.Remove(12345));
}

TEST(LoadWaitQueueTest, FullQueueShedsTheNewcomerOfTheBusiestTenant) {
  LoadWaitQueue queue(3);
  Log log;
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a" + std::to_string(i))).ok());
  }
  auto refused = queue.Push({.tenant = "a"}, log.Waiter("a4"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-waiting-requests 3"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(log.events.empty());  // a4 was never queued, so never woken
}

TEST(LoadWaitQueueTest, FullQueueMakesRoomForATenantWithFewerWaiters) {
  LoadWaitQueue queue(4);
  Log log;
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(queue.Push({.tenant = "a"}, log.Waiter("a" + std::to_string(i))).ok());
  }
  // b waits with none: a's newest gives way, twice (a: 3 then 2, b: 1 then 2).
  ASSERT_TRUE(queue.Push({.tenant = "b"}, log.Waiter("b1")).ok());
  ASSERT_TRUE(queue.Push({.tenant = "b"}, log.Waiter("b2")).ok());
  EXPECT_EQ(log.events, std::vector<std::string>({"a4:shed", "a3:shed"}));
  // Now even: a third b request is refused rather than taking a's place.
  EXPECT_EQ(queue.Push({.tenant = "b"}, log.Waiter("b3")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.waiting(), 4u);
  queue.WakeNext(4);
  EXPECT_EQ(log.events, std::vector<std::string>({"a4:shed", "a3:shed", "a1", "b1", "a2", "b2"}));
}

TEST(LoadWaitQueueTest, ZeroBoundQueuesNobody) {
  LoadWaitQueue queue(0);
  Log log;
  EXPECT_EQ(queue.Push({}, log.Waiter("x")).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(LoadWaitQueueTest, EveryWaiterIsWokenExactlyOnceUnderConcurrency) {
  LoadWaitQueue queue(100000);
  std::atomic<int> woken{0}, removed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto place = queue.Push({.tenant = "t" + std::to_string(t % 2)}, [&](bool) { ++woken; });
        ASSERT_TRUE(place.ok());
        if (i % 3 == 0 && queue.Remove(*place)) ++removed;
        if (i % 2 == 0) queue.WakeNext();
      }
    });
  }
  for (auto& t : threads) t.join();
  queue.WakeNext(100000);
  EXPECT_EQ(woken + removed, 8000);
  EXPECT_EQ(queue.waiting(), 0u);
}

}  // namespace
}  // namespace yoco
