// StallWatch on a made-up clock: a stream is reported once when its worker turns unhealthy and it
// has been silent for the floor, or when its gap since the last token passes multiple × its
// average gap (at least the floor); never before its first token except for health, never after
// Unwatch.
#include "lib/routing/stall_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

namespace yoco {
namespace {

class StallWatchTest : public ::testing::Test {
 protected:
  StallWatchTest()
      : watch_({.multiple = 10, .min_timeout = absl::Seconds(1), .sweep_interval = {}},
               [this](size_t worker) { return unhealthy_.count(worker) == 0; }) {}

  std::set<size_t> unhealthy_;
  StallWatch watch_;
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(StallWatchTest, GapBeyondTheMultipleOfTheAverageIsAStall) {
  int stalls = 0;
  const uint64_t id = watch_.Watch(
      0, [&] { ++stalls; }, t0_);
  // Tokens every 200 ms: the threshold is 10 × 200 ms = 2 s.
  for (int i = 0; i < 5; ++i) watch_.Progress(id, t0_ + absl::Milliseconds(200 * i));
  const absl::Time last = t0_ + absl::Milliseconds(800);
  watch_.Sweep(last + absl::Milliseconds(1900));
  EXPECT_EQ(stalls, 0);
  watch_.Sweep(last + absl::Milliseconds(2100));
  EXPECT_EQ(stalls, 1);
  watch_.Sweep(last + absl::Seconds(60));  // reported once
  EXPECT_EQ(stalls, 1);
  EXPECT_EQ(watch_.watched(), 0u);
}

TEST_F(StallWatchTest, FastStreamsAreHeldToTheFloor) {
  int stalls = 0;
  const uint64_t id = watch_.Watch(
      0, [&] { ++stalls; }, t0_);
  for (int i = 0; i < 10; ++i) watch_.Progress(id, t0_ + absl::Milliseconds(i));  // 1 ms apart
  watch_.Sweep(t0_ + absl::Milliseconds(900));  // 10 ms would be 10 × the average: floor 1 s
  EXPECT_EQ(stalls, 0);
  watch_.Sweep(t0_ + absl::Milliseconds(1100));
  EXPECT_EQ(stalls, 1);
}

TEST_F(StallWatchTest, BeforeTheFirstTokenOnlyHealthCounts) {
  int stalls = 0;
  watch_.Watch(
      3, [&] { ++stalls; }, t0_);
  watch_.Sweep(t0_ + absl::Hours(1));  // a long wait for a place in the batch is no stall
  EXPECT_EQ(stalls, 0);
  unhealthy_.insert(3);
  watch_.Sweep(t0_ + absl::Hours(1));
  EXPECT_EQ(stalls, 1);
}

TEST_F(StallWatchTest, AnUnhealthyWorkerStallsOnlyItsOwnStreams) {
  int on_a = 0, on_b = 0;
  const uint64_t a = watch_.Watch(
      1, [&] { ++on_a; }, t0_);
  watch_.Watch(
      2, [&] { ++on_b; }, t0_);
  watch_.Progress(a, t0_);
  unhealthy_.insert(1);
  watch_.Sweep(t0_ + absl::Milliseconds(900));  // silent for less than the floor: not yet
  EXPECT_EQ(on_a, 0);
  watch_.Sweep(t0_ + absl::Milliseconds(1100));
  EXPECT_EQ(on_a, 1);
  EXPECT_EQ(on_b, 0);
  EXPECT_EQ(watch_.watched(), 1u);
}

TEST_F(StallWatchTest, AnUnhealthyWorkerThatKeepsSendingKeepsItsStreams) {
  // A draining worker fails its probes but finishes its streams.
  int stalls = 0;
  const uint64_t id = watch_.Watch(
      0, [&] { ++stalls; }, t0_);
  unhealthy_.insert(0);
  for (int i = 0; i < 100; ++i) {
    const absl::Time t = t0_ + absl::Milliseconds(100 * i);
    watch_.Progress(id, t);
    watch_.Sweep(t + absl::Milliseconds(50));
  }
  EXPECT_EQ(stalls, 0);
}

// A lone worker that slows under load keeps its streams (there is nowhere to move them); once
// another worker is healthy the same gap is a stall, and silence on an unhealthy worker always is.
TEST(StallWatchAloneTest, ALoneWorkerThatOnlySlowsKeepsItsStreams) {
  bool others = false, healthy = true;
  StallWatch watch(
      {.multiple = 10, .min_timeout = absl::Seconds(1), .sweep_interval = {}},
      [&](size_t) { return healthy; }, [&](size_t) { return others; });
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int stalls = 0;
  const uint64_t id = watch.Watch(
      0, [&] { ++stalls; }, t0);
  for (int i = 0; i < 5; ++i) watch.Progress(id, t0 + absl::Milliseconds(200 * i));
  const absl::Time last = t0 + absl::Milliseconds(800);
  watch.Sweep(last + absl::Seconds(30));  // 150x its average gap
  EXPECT_EQ(stalls, 0);
  others = true;
  watch.Sweep(last + absl::Seconds(31));
  EXPECT_EQ(stalls, 1);

  others = false;
  const uint64_t silent = watch.Watch(
      0, [&] { ++stalls; }, t0);
  watch.Progress(silent, t0);
  healthy = false;
  watch.Sweep(t0 + absl::Seconds(2));
  EXPECT_EQ(stalls, 2);
}

TEST_F(StallWatchTest, UnwatchedStreamsAreNeverReported) {
  int stalls = 0;
  const uint64_t id = watch_.Watch(
      0, [&] { ++stalls; }, t0_);
  watch_.Progress(id, t0_);
  watch_.Unwatch(id);
  watch_.Unwatch(id);
  watch_.Progress(id, t0_);  // a late token of an unwatched stream: nothing
  unhealthy_.insert(0);
  watch_.Sweep(t0_ + absl::Hours(1));
  EXPECT_EQ(stalls, 0);
}

TEST(StallWatchSweeperTest, TheSweepingThreadReportsAStalledStream) {
  std::atomic<int> stalls{0};
  StallWatch watch({.multiple = 10,
                    .min_timeout = absl::Milliseconds(50),
                    .sweep_interval = absl::Milliseconds(5)},
                   [](size_t) { return true; });
  const uint64_t id = watch.Watch(0, [&] { ++stalls; });
  watch.Progress(id);
  for (int i = 0; i < 400 && stalls == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(stalls, 1);
}

}  // namespace
}  // namespace yoco
