// LoadQueuePlace: a request keeps its turn across waits, leaves the queue at once when
// cancelled (even before its place is known), and is answered exactly once per wait.
#include "lib/routing/load_queue_place.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace yoco {
namespace {

TEST(LoadQueuePlaceTest, AWaitAgainKeepsTheFirstTurn) {
  LoadWaitQueue queue(8);
  std::vector<std::string> events;
  LoadQueuePlace place(queue, [&](bool turn) { events.push_back(turn ? "place" : "place:shed"); });
  EXPECT_FALSE(place.waited());
  ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
  EXPECT_TRUE(place.waited());
  ASSERT_TRUE(queue.Push({.tenant = "a"}, [&](bool) { events.push_back("later"); }).ok());
  queue.WakeNext();
  ASSERT_EQ(events, std::vector<std::string>({"place"}));
  // Woken, it found no room: it waits again, still ahead of the later request.
  ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
  queue.WakeNext(2);
  EXPECT_EQ(events, std::vector<std::string>({"place", "place", "later"}));
}

TEST(LoadQueuePlaceTest, CancelLeavesTheQueueAtOnce) {
  LoadWaitQueue queue(8);
  int answers = 0;
  LoadQueuePlace place(queue, [&](bool turn) {
    EXPECT_TRUE(turn);
    ++answers;
  });
  ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
  ASSERT_EQ(queue.waiting(), 1u);
  place.Cancel();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(queue.waiting(), 0u);
  place.Cancel();  // nothing left to take out
  EXPECT_EQ(answers, 1);
}

TEST(LoadQueuePlaceTest, CancelledBeforeWaitingIsAnsweredByWait) {
  LoadWaitQueue queue(8);
  int answers = 0;
  LoadQueuePlace place(queue, [&](bool) { ++answers; });
  place.Cancel();
  ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(queue.waiting(), 0u);
}

TEST(LoadQueuePlaceTest, AFullQueueIsAnErrorAndNoAnswer) {
  LoadWaitQueue queue(1);
  ASSERT_TRUE(queue.Push({.tenant = "a"}, [](bool) {}).ok());
  int answers = 0;
  LoadQueuePlace place(queue, [&](bool) { ++answers; });
  const absl::Status status = place.Wait({.tenant = "a"});
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_FALSE(place.waited());
  EXPECT_EQ(answers, 0);
}

TEST(LoadQueuePlaceTest, ShedByAnotherTenantIsAnsweredFalse) {
  LoadWaitQueue queue(2);
  std::vector<bool> answers;
  LoadQueuePlace first(queue, [&](bool turn) { answers.push_back(turn); });
  LoadQueuePlace second(queue, [&](bool turn) { answers.push_back(turn); });
  ASSERT_TRUE(first.Wait({.tenant = "a"}).ok());
  ASSERT_TRUE(second.Wait({.tenant = "a"}).ok());
  ASSERT_TRUE(
      queue.Push({.tenant = "b"}, [](bool) {}).ok());  // b waits with fewer: a's newest is shed
  EXPECT_EQ(answers, std::vector<bool>({false}));
}

// A wake-up and a cancellation racing: each wait is answered exactly once.
TEST(LoadQueuePlaceTest, WakeAndCancelRacingAnswerOnce) {
  for (int i = 0; i < 500; ++i) {
    LoadWaitQueue queue(8);
    std::atomic<int> answers = 0;
    LoadQueuePlace place(queue, [&](bool) { ++answers; });
    std::thread waker;
    if (i % 2 == 0) {
      ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
      waker = std::thread([&] { queue.WakeNext(); });
      place.Cancel();
    } else {
      waker = std::thread([&] { place.Cancel(); });
      ASSERT_TRUE(place.Wait({.tenant = "a"}).ok());
      queue.WakeNext();
    }
    waker.join();
    ASSERT_EQ(answers.load(), 1) << "iteration " << i;
    ASSERT_EQ(queue.waiting(), 0u);
  }
}

}  // namespace
}  // namespace yoco
