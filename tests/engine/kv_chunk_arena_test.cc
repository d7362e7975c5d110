// KvChunkArena: chunks are zero however they come (fresh or reused), aligned, distinct while
// held, and a freed chunk is reused for the next of its size instead of mapping more memory.
#include "lib/engine/kv_chunk_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace yoco {
namespace {

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

TEST(KvChunkArenaTest, ChunksAreZeroAlignedDistinctAndReused) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer every chunk is its own allocation";
#endif
  KvChunkArena arena;
  constexpr size_t kBytes = 3 * 64 * 1024 + 64;  // not a divisor of a slab
  std::vector<std::shared_ptr<uint8_t>> held;
  std::set<const uint8_t*> seen;
  for (int i = 0; i < 40; ++i) {  // more than one slab's worth
    held.push_back(arena.Allocate(kBytes));
    const uint8_t* p = held.back().get();
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    ASSERT_TRUE(AllZero(p, kBytes)) << "chunk " << i;
    ASSERT_TRUE(seen.insert(p).second) << "chunk " << i << " handed out twice";
    std::memset(held.back().get(), 0xAB, kBytes);  // its holder writes all of it
  }
  const int64_t mapped = arena.stats().slab_bytes;
  EXPECT_GE(mapped, static_cast<int64_t>(40 * kBytes));
  held.clear();  // all back in the arena, dirty
  for (int i = 0; i < 40; ++i) {
    held.push_back(arena.Allocate(kBytes));
    ASSERT_TRUE(AllZero(held.back().get(), kBytes)) << "reused chunk " << i << " not zeroed";
    EXPECT_EQ(seen.count(held.back().get()), 1u) << "a new chunk while freed ones waited";
  }
  EXPECT_EQ(arena.stats().slab_bytes, mapped);
  // Another size does not take this size's chunks.
  auto other = arena.Allocate(1000);
  EXPECT_EQ(seen.count(other.get()), 0u);
}

TEST(KvChunkArenaTest, ReservedChunksAreHandedOutWithoutMappingMore) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer every chunk is its own allocation";
#endif
  KvChunkArena arena;
  constexpr size_t kBytes = 64 * 1024;
  constexpr size_t kWant = 5 * 1024 * 1024;  // two and a half slabs
  const int64_t mapped = arena.Reserve(kBytes, kWant);
  EXPECT_GE(mapped, static_cast<int64_t>(kWant));
  EXPECT_EQ(arena.stats().slab_bytes, mapped);
  EXPECT_GE(arena.stats().free_bytes, static_cast<int64_t>(kWant));
  EXPECT_EQ(arena.Reserve(kBytes, kWant), 0) << "already reserved";
  std::vector<std::shared_ptr<uint8_t>> held;
  for (size_t i = 0; i < kWant / kBytes; ++i) {
    held.push_back(arena.Allocate(kBytes));
    ASSERT_TRUE(AllZero(held.back().get(), kBytes)) << "reserved chunk " << i;
  }
  EXPECT_EQ(arena.stats().slab_bytes, mapped) << "the reserve did not serve the allocations";
  // Chunks in use do not count as ready: reserving again maps more.
  EXPECT_GT(arena.Reserve(kBytes, kWant), 0);
}

}  // namespace
}  // namespace yoco
