// BoundedJobQueue: jobs run in order on one thread (FairOrder across classes), a full queue
// drops, destruction drains.
#include "lib/threading/bounded_job_queue.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

namespace yoco {
namespace {

TEST(BoundedJobQueueTest, RunsInOrderDropsWhenFullAndDrainsOnDestruction) {
  std::vector<int> ran;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  {
    BoundedJobQueue queue(2);
    std::promise<void> started;
    ASSERT_TRUE(queue.Post([&] {
      started.set_value();
      gate.wait();  // holds the thread so the queue fills up behind it
      ran.push_back(0);
    }));
    started.get_future().wait();
    EXPECT_TRUE(queue.Post([&] { ran.push_back(1); }));
    EXPECT_TRUE(queue.Post([&] { ran.push_back(2); }));
    EXPECT_FALSE(queue.Post([&] { ran.push_back(3); }));
    EXPECT_EQ(queue.dropped(), 1u);
    EXPECT_EQ(queue.pending(), 3u);
    release.set_value();
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
}

// Jobs waiting behind a running one go by priority, then tenants in turn, not by arrival.
TEST(BoundedJobQueueTest, WaitingJobsGoInFairOrder) {
  std::vector<std::string> ran;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  {
    BoundedJobQueue queue(8);
    std::promise<void> started;
    ASSERT_TRUE(queue.Post([&] {
      started.set_value();
      gate.wait();
    }));
    started.get_future().wait();
    for (const char* name : {"a1", "a2", "a3"}) {
      ASSERT_TRUE(queue.Post([&ran, name] { ran.push_back(name); }, {.tenant = "a"}));
    }
    ASSERT_TRUE(queue.Post([&] { ran.push_back("b1"); }, {.tenant = "b"}));
    ASSERT_TRUE(queue.Post([&] { ran.push_back("urgent"); }, {.tenant = "b", .priority = -5}));
    release.set_value();
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"urgent", "a1", "b1", "a2", "a3"}));
}

}  // namespace
}  // namespace yoco
