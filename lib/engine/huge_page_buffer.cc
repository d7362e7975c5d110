#include "lib/engine/huge_page_buffer.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace yoco {

HugePageBuffer::HugePageBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  data_ = static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{AlignmentFor(bytes)}));
  // Only whole huge pages: the kernel backs the tail with small pages either way. A refusal
  // (transparent huge pages off, an old kernel) leaves ordinary memory, which works the same.
  if (bytes >= kHugePageBytes) {
    (void)madvise(data_, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  }
}

HugePageBuffer::~HugePageBuffer() { Release(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HugePageBuffer::Release() {
  if (data_ != nullptr) ::operator delete (data_, std::align_val_t{AlignmentFor(size_)});
  data_ = nullptr;
  size_ = 0;
}

}  // namespace yoco
