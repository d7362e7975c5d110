// BoundedJobQueue: jobs run in order on one thread, a full queue drops, destruction drains.
#include "lib/threading/bounded_job_queue.h"

#include <gtest/gtest.h>

#include <future>
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

}  // namespace
}  // namespace yoco
