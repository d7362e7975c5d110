// CacheEventLog: watchers read in order from their own place, wait for news, and are told when
// the ring dropped events they had not read.
#include "lib/routing/cache_event_log.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

std::vector<CacheEvent> Events(int first, int n) {
  std::vector<CacheEvent> events;
  for (int i = first; i < first + n; ++i) {
    events.push_back({CacheEvent::Kind::kStored, BlockKey{}, absl::StrCat("w", i)});
  }
  return events;
}

TEST(CacheEventLogTest, ReadsInOrderAndSaysWhatWasDropped) {
  CacheEventLog log(/*capacity=*/4);
  EXPECT_EQ(log.end(), 0u);
  log.Append(Events(0, 3));
  CacheEventLog::Batch batch = log.Read(0, 2, absl::ZeroDuration());
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].worker, "w0");
  EXPECT_EQ(batch.events[1].worker, "w1");
  EXPECT_FALSE(batch.missed);
  EXPECT_EQ(batch.next, 2u);
  // Three more: the ring keeps w2..w5, so a reader at 2 misses nothing, one at 0 misses two.
  log.Append(Events(3, 3));
  EXPECT_EQ(log.end(), 6u);
  batch = log.Read(2, 10, absl::ZeroDuration());
  EXPECT_FALSE(batch.missed);
  ASSERT_EQ(batch.events.size(), 4u);
  EXPECT_EQ(batch.events[0].worker, "w2");
  EXPECT_EQ(batch.next, 6u);
  batch = log.Read(0, 10, absl::ZeroDuration());
  EXPECT_TRUE(batch.missed);
  ASSERT_EQ(batch.events.size(), 4u);
  EXPECT_EQ(batch.events[0].worker, "w2");
  // Nothing new: an empty batch after the wait, the place kept.
  batch = log.Read(6, 10, absl::Milliseconds(20));
  EXPECT_TRUE(batch.events.empty());
  EXPECT_FALSE(batch.missed);
  EXPECT_EQ(batch.next, 6u);
}

TEST(CacheEventLogTest, AWaitingReaderWakesForAnAppend) {
  CacheEventLog log;
  std::thread appender([&] {
    absl::SleepFor(absl::Milliseconds(50));
    log.Append(Events(0, 1));
  });
  const absl::Time start = absl::Now();
  CacheEventLog::Batch batch = log.Read(0, 10, absl::Seconds(30));
  appender.join();
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

}  // namespace
}  // namespace yoco
