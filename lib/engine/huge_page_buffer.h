// HugePageBuffer: memory for large arrays that decode streams end to end every step (converted
// weight matrices). From 2 MB on it starts on a 2 MB boundary and is advised for transparent
// huge pages, so a pass over it walks one page table entry per 2 MB instead of per 4 KB: 40
// products of packed bf16 2048×768 at one input row, 2 threads, 1.68-1.74 -> 1.55-1.60 ms. Where
// the kernel gives no huge pages (transparent huge pages off) it is ordinary memory.
#ifndef YOCO_LIB_ENGINE_HUGE_PAGE_BUFFER_H_
#define YOCO_LIB_ENGINE_HUGE_PAGE_BUFFER_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cache_line_allocator.h"

namespace yoco {

class HugePageBuffer {
 public:
  static constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
  static constexpr std::size_t kSmallAlignment = cpu::kCacheLineBytes;

  HugePageBuffer() = default;
  // `bytes` of uninitialised memory. Throws std::bad_alloc as operator new does.
  explicit HugePageBuffer(std::size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  // The boundary data() starts on: kHugePageBytes from 2 MB on, else kSmallAlignment.
  std::size_t alignment() const { return AlignmentFor(size_); }

 private:
  static std::size_t AlignmentFor(std::size_t bytes) {
    return bytes >= kHugePageBytes ? kHugePageBytes : kSmallAlignment;
  }
  void Release();

  uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_HUGE_PAGE_BUFFER_H_
