// KvChunkArena: huge-page slabs cut into chunks of one size each, free lists by size.
#include "lib/engine/kv_chunk_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "absl/synchronization/mutex.h"

namespace yoco {
namespace {

constexpr std::size_t kSlabAlignment = std::size_t{2} << 20;  // a transparent huge page

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// `bytes` (a multiple of kSlabAlignment) of zeroed memory on a huge-page boundary, advised for
// huge pages. Straight from the kernel: heap memory may be reused, and then not zero.
uint8_t* MapSlab(std::size_t bytes) {
  const std::size_t mapped = bytes + kSlabAlignment;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = RoundUp(start, kSlabAlignment);
  if (aligned > start) munmap(p, aligned - start);
  const std::uintptr_t end = start + mapped;
  if (end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  // A refusal (transparent huge pages off) leaves small pages, which work the same.
  (void)madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

KvChunkArena& KvChunkArena::Global() {
  // Never destroyed: chunks held by static objects may be freed after main returns.
  static KvChunkArena* arena = new KvChunkArena();
  return *arena;
}

std::shared_ptr<uint8_t> KvChunkArena::Allocate(std::size_t bytes) {
  return AllocateChunk(bytes, /*zeroed=*/true);
}

std::shared_ptr<uint8_t> KvChunkArena::AllocateUninitialized(std::size_t bytes) {
  return AllocateChunk(bytes, /*zeroed=*/false);
}

std::shared_ptr<uint8_t> KvChunkArena::AllocateChunk(std::size_t bytes, bool zeroed) {
  const std::size_t size = RoundUp(std::max<std::size_t>(bytes, 1), cpu::kCacheLineBytes);
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer every chunk is its own allocation, so that a read of a chunk after
  // its last holder let go is caught rather than served from a reused chunk.
  auto* own = static_cast<uint8_t*>(::operator new (size, std::align_val_t{cpu::kCacheLineBytes}));
  if (zeroed) std::memset(own, 0, size);
  return std::shared_ptr<uint8_t>(
      own, [](uint8_t* p) { ::operator delete (p, std::align_val_t{cpu::kCacheLineBytes}); });
#endif
  uint8_t* chunk = nullptr;
  bool recycled = false;
  {
    absl::MutexLock lock(&mu_);
    SizeClass& c = sizes_[size];
    if (!c.recycled.empty()) {
      chunk = c.recycled.back();
      c.recycled.pop_back();
      recycled = true;
    } else {
      if (c.fresh.empty()) AddSlabLocked(size, /*touch=*/false);
      chunk = c.fresh.back();
      c.fresh.pop_back();
    }
    free_bytes_ -= static_cast<int64_t>(size);
  }
  if (recycled && zeroed) std::memset(chunk, 0, size);  // fresh ones are the kernel's zero pages
  return std::shared_ptr<uint8_t>(chunk, [this, size](uint8_t* p) { Free(p, size); });
}

std::size_t KvChunkArena::AddSlabLocked(std::size_t size, bool touch) {
  // A slab of whole huge pages holding at least one chunk, cut into chunks of this size.
  const std::size_t slab_bytes = RoundUp(size, kSlabAlignment);
  uint8_t* slab = MapSlab(slab_bytes);
  // Writing zeros keeps the chunks fresh (zero) and makes the kernel back them now.
  if (touch) std::memset(slab, 0, slab_bytes);
  slab_bytes_ += static_cast<int64_t>(slab_bytes);
  SizeClass& c = sizes_[size];
  for (std::size_t at = slab_bytes / size * size; at >= size; at -= size) {
    c.fresh.push_back(slab + at - size);  // taken from the back: in address order
  }
  free_bytes_ += static_cast<int64_t>(slab_bytes / size * size);
  return slab_bytes;
}

int64_t KvChunkArena::Reserve(std::size_t chunk_bytes, std::size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  return 0;
#endif
  const std::size_t size = RoundUp(std::max<std::size_t>(chunk_bytes, 1), cpu::kCacheLineBytes);
  absl::MutexLock lock(&mu_);
  int64_t mapped = 0;
  for (;;) {
    const SizeClass& c = sizes_[size];
    if ((c.fresh.size() + c.recycled.size()) * size >= bytes) break;
    mapped += static_cast<int64_t>(AddSlabLocked(size, /*touch=*/true));
  }
  return mapped;
}

void KvChunkArena::Free(uint8_t* chunk, std::size_t bytes) {
  absl::MutexLock lock(&mu_);
  sizes_[bytes].recycled.push_back(chunk);
  free_bytes_ += static_cast<int64_t>(bytes);
}

KvChunkArenaStats KvChunkArena::stats() const {
  absl::MutexLock lock(&mu_);
  return {slab_bytes_, free_bytes_};
}

}  // namespace yoco
