// PeriodicTask: runs every interval, never when the interval is zero, and a long interval does
// not delay destruction.
#include "lib/threading/periodic_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace yoco {
namespace {

TEST(PeriodicTaskTest, RunsEveryIntervalUntilDestroyed) {
  std::atomic<int> runs{0};
  {
    PeriodicTask task(absl::Milliseconds(5), [&] { ++runs; });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (runs < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_GE(runs.load(), 3);
  const int after = runs.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(runs.load(), after);  // nothing runs after destruction
}

TEST(PeriodicTaskTest, ZeroIntervalNeverRuns) {
  std::atomic<int> runs{0};
  {
    PeriodicTask task(absl::ZeroDuration(), [&] { ++runs; });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(runs.load(), 0);
}

TEST(PeriodicTaskTest, LongIntervalDoesNotDelayDestruction) {
  std::atomic<int> runs{0};
  const auto start = std::chrono::steady_clock::now();
  {
    PeriodicTask task(absl::Hours(1), [&] { ++runs; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(runs.load(), 0);
}

}  // namespace
}  // namespace yoco
