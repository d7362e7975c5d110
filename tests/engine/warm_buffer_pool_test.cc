// WarmBufferPool: a returned buffer is the one handed out next (smallest that fits), idle
// memory stays under its bound (smallest dropped first), and buffers may outlive the pool.
#include "lib/engine/warm_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace yoco {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(WarmBufferPoolTest, AReturnedBufferServesTheNextRequestThatFits) {
  WarmBufferPool pool(64 * kMiB);
  uint8_t* first = nullptr;
  {
    std::unique_ptr<WarmBuffer> b = pool.Take(10 * kMiB + 5);
    ASSERT_NE(b->data(), nullptr);
    EXPECT_EQ(b->size(), 10 * kMiB + 5);
    std::memset(b->data(), 0x5A, b->size());  // every byte usable (sanitizer build checks)
    first = b->data();
    EXPECT_EQ(pool.stats().in_use_bytes, static_cast<int64_t>(12 * kMiB)) << "whole 2 MB pages";
  }
  EXPECT_EQ(pool.stats().kept_bytes, static_cast<int64_t>(12 * kMiB));
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
  {
    std::unique_ptr<WarmBuffer> smaller = pool.Take(3 * kMiB);
    EXPECT_EQ(smaller->data(), first) << "the kept buffer fits";
    std::unique_ptr<WarmBuffer> second = pool.Take(3 * kMiB);
    EXPECT_NE(second->data(), first);
    EXPECT_EQ(pool.stats().reused, 1);
    EXPECT_EQ(pool.stats().fresh, 2);
  }
  // Now 12 MB and 4 MB are idle; 5 MB takes the smallest that fits (the 12 MB one), and a
  // request larger than both allocates.
  std::unique_ptr<WarmBuffer> fits = pool.Take(5 * kMiB);
  EXPECT_EQ(fits->data(), first);
  std::unique_ptr<WarmBuffer> large = pool.Take(20 * kMiB);
  EXPECT_EQ(pool.stats().fresh, 3);
}

TEST(WarmBufferPoolTest, IdleMemoryStaysUnderItsBoundSmallestFirst) {
  WarmBufferPool pool(16 * kMiB);
  std::unique_ptr<WarmBuffer> a = pool.Take(4 * kMiB);
  std::unique_ptr<WarmBuffer> b = pool.Take(8 * kMiB);
  std::unique_ptr<WarmBuffer> c = pool.Take(10 * kMiB);
  std::unique_ptr<WarmBuffer> too_big = pool.Take(32 * kMiB);
  uint8_t* c_data = c->data();
  too_big.reset();  // larger than the bound: not kept
  EXPECT_EQ(pool.stats().kept_bytes, 0);
  a.reset();
  b.reset();
  EXPECT_EQ(pool.stats().kept_bytes, static_cast<int64_t>(12 * kMiB));
  c.reset();  // 22 MB idle: the 4 MB one goes, then the 8 MB one
  EXPECT_EQ(pool.stats().kept_bytes, static_cast<int64_t>(10 * kMiB));
  std::unique_ptr<WarmBuffer> again = pool.Take(kMiB);
  EXPECT_EQ(again->data(), c_data);
  const int64_t fresh = pool.stats().fresh;
  std::unique_ptr<WarmBuffer> after = pool.Take(8 * kMiB);  // b was dropped: a new one
  EXPECT_EQ(pool.stats().fresh, fresh + 1);
}

TEST(WarmBufferPoolTest, APrefaultedBufferIsKeptForTheFirstRequest) {
  WarmBufferPool pool(8 * kMiB);
  pool.Prefault(6 * kMiB);
  EXPECT_EQ(pool.stats().kept_bytes, static_cast<int64_t>(6 * kMiB));
  std::unique_ptr<WarmBuffer> b = pool.Take(5 * kMiB);
  EXPECT_EQ(pool.stats().reused, 1);
  WarmBufferPool bounded(4 * kMiB);
  bounded.Prefault(6 * kMiB);  // no more than the bound
  EXPECT_EQ(bounded.stats().kept_bytes, static_cast<int64_t>(4 * kMiB));
}

// Bundle parts need several buffers of a part's size at once: prefaulted in pieces, each is
// its own buffer, and as many parts as pieces are served without allocating.
TEST(WarmBufferPoolTest, PrefaultedPiecesServeThatManyRequestsAtOnce) {
  WarmBufferPool pool(8 * kMiB);
  pool.Prefault(7 * kMiB, 2 * kMiB);  // three pieces: 7 MiB holds no fourth
  EXPECT_EQ(pool.stats().kept_bytes, static_cast<int64_t>(6 * kMiB));
  const int64_t fresh = pool.stats().fresh;
  std::vector<std::unique_ptr<WarmBuffer>> parts;
  for (int i = 0; i < 3; ++i) parts.push_back(pool.Take(2 * kMiB));
  EXPECT_EQ(pool.stats().reused, 3);
  EXPECT_EQ(pool.stats().fresh, fresh);
  EXPECT_NE(parts[0]->data(), parts[1]->data());
  parts.push_back(pool.Take(2 * kMiB));
  EXPECT_EQ(pool.stats().fresh, fresh + 1);
}

TEST(WarmBufferPoolTest, BuffersOutliveThePoolAndThreadsShareIt) {
  std::unique_ptr<WarmBuffer> survivor;
  {
    WarmBufferPool pool(8 * kMiB);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&pool, t] {
        for (int i = 0; i < 200; ++i) {
          std::unique_ptr<WarmBuffer> b = pool.Take(static_cast<size_t>(1 + (i + t) % 3) * kMiB);
          b->data()[0] = static_cast<uint8_t>(i);
          b->data()[b->size() - 1] = static_cast<uint8_t>(t);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const WarmBufferPoolStats s = pool.stats();
    EXPECT_EQ(s.in_use_bytes, 0);
    EXPECT_EQ(s.reused + s.fresh, 800);
    EXPECT_LE(s.kept_bytes, static_cast<int64_t>(8 * kMiB));
    survivor = pool.Take(3 * kMiB);
  }
  std::memset(survivor->data(), 1, survivor->size());
  survivor.reset();  // returned to a shelf the pool no longer has
}

}  // namespace
}  // namespace yoco
