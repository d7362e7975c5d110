// HugePageBuffer: the sizes and boundaries it promises, every byte usable, and ownership that
// moves (the loader keeps its weight buffers in a vector that grows).
#include "lib/engine/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace yoco {
namespace {

TEST(HugePageBufferTest, StartsOnItsBoundaryAndHoldsEveryByte) {
  for (const std::size_t bytes :
       {std::size_t{1}, std::size_t{4096}, HugePageBuffer::kHugePageBytes - 1,
        HugePageBuffer::kHugePageBytes, HugePageBuffer::kHugePageBytes * 3 + 12345}) {
    SCOPED_TRACE(bytes);
    HugePageBuffer buffer(bytes);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), bytes);
    const std::size_t want = bytes >= HugePageBuffer::kHugePageBytes
                                 ? HugePageBuffer::kHugePageBytes
                                 : HugePageBuffer::kSmallAlignment;
    EXPECT_EQ(buffer.alignment(), want);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % want, 0u);
    // Every byte written and read back (the sanitizer build checks the bounds).
    for (std::size_t i = 0; i < bytes; ++i) buffer.data()[i] = static_cast<uint8_t>(i * 7 + 1);
    for (std::size_t i = 0; i < bytes; i += 997) {
      ASSERT_EQ(buffer.data()[i], static_cast<uint8_t>(i * 7 + 1));
    }
    EXPECT_EQ(buffer.data()[bytes - 1], static_cast<uint8_t>((bytes - 1) * 7 + 1));
  }
}

TEST(HugePageBufferTest, MovesOwnershipAndAnEmptyOneHoldsNothing) {
  HugePageBuffer empty;
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(HugePageBuffer(0).data(), nullptr);

  std::vector<HugePageBuffer> buffers;
  std::vector<uint8_t*> addresses;
  for (int i = 0; i < 5; ++i) {  // the vector reallocates: the buffers must move, not copy
    buffers.emplace_back(HugePageBuffer::kHugePageBytes + i);
    std::memset(buffers.back().data(), i, buffers.back().size());
    addresses.push_back(buffers.back().data());
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(buffers[i].data(), addresses[i]);
    EXPECT_EQ(buffers[i].data()[buffers[i].size() - 1], i);
  }
  HugePageBuffer moved = std::move(buffers[0]);
  EXPECT_EQ(moved.data(), addresses[0]);
  EXPECT_EQ(buffers[0].data(), nullptr);
  EXPECT_EQ(buffers[0].size(), 0u);
  moved = std::move(buffers[1]);  // releases what it held
  EXPECT_EQ(moved.data(), addresses[1]);
  EXPECT_EQ(moved.size(), HugePageBuffer::kHugePageBytes + 1);
}

}  // namespace
}  // namespace yoco
