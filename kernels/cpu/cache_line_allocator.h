// CacheLineAllocator: an allocator whose blocks start on a cache line, for arrays the kernels
// read with 64-byte vector loads. glibc's large blocks start 16 bytes past a page, so without it
// every 64-byte load of such an array straddles two lines: decode attention over fp32 K/V rows
// took ~100 cycles a key instead of ~74 (one thread, rows in L2).
#ifndef YOCO_KERNELS_CPU_CACHE_LINE_ALLOCATOR_H_
#define YOCO_KERNELS_CPU_CACHE_LINE_ALLOCATOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace yoco::cpu {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  // The unsized form: clang (the fuzzing build) leaves sized deallocation off by default.
  void deallocate(T* p, std::size_t /*n*/) {
    ::operator delete (p, std::align_val_t{kCacheLineBytes});
  }

  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace yoco::cpu

#endif  // YOCO_KERNELS_CPU_CACHE_LINE_ALLOCATOR_H_
