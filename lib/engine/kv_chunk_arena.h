// KvChunkArena: the memory of KvRows chunks. A long document is thousands of chunks (a 1M-token
// document's shared K/V is 16K of them); fresh heap memory for each costs a page fault per 4 KB
// on first touch, which in a virtual machine made up most of the time to receive a bundle
// (a 64K-token bundle: ~30% of the decode worker's profile in faults under the zeroing memset).
// The arena carves chunks out of slabs of 2 MB pages (mapped from the kernel, advised for
// transparent huge pages: one fault per 2 MB, and already zero) and keeps freed chunks for the
// next ones of their size, so a worker that has held a document once serves the next from
// memory already mapped.
//
// Slabs are never unmapped: a worker's footprint is its peak chunk memory (which its budgets
// bound). Thread-safe.
#ifndef YOCO_LIB_ENGINE_KV_CHUNK_ARENA_H_
#define YOCO_LIB_ENGINE_KV_CHUNK_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/cpu/cache_line_allocator.h"

namespace yoco {

struct KvChunkArenaStats {
  int64_t slab_bytes = 0;  // mapped for chunks
  int64_t free_bytes = 0;  // of those, freed chunks waiting for reuse
};

class KvChunkArena {
 public:
  // The process's arena.
  static KvChunkArena& Global();

  // `bytes` of zeroed, cache-line aligned memory, back in the arena when the last holder lets
  // go. The arena must outlive it (the global one does).
  std::shared_ptr<uint8_t> Allocate(std::size_t bytes);
  // The same without zeroing a reused chunk, for a caller about to write all of it (a chunk
  // received whole): the memset would be one more pass over every byte received.
  std::shared_ptr<uint8_t> AllocateUninitialized(std::size_t bytes);

  // Maps and touches slabs until chunks of `chunk_bytes` have at least `bytes` ready (free and
  // already backed by memory), so that the first long document a worker receives does not pay
  // for fresh pages (in a virtual machine 20-50x slower to touch than pages touched before).
  // Returns the bytes mapped. A no-op under AddressSanitizer.
  int64_t Reserve(std::size_t chunk_bytes, std::size_t bytes);

  KvChunkArenaStats stats() const;

 private:
  // Maps a slab for chunks of `size` onto their fresh list; returns its bytes. mu_ held.
  std::size_t AddSlabLocked(std::size_t size, bool touch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<uint8_t> AllocateChunk(std::size_t bytes, bool zeroed);
  // Puts a chunk of `bytes` back on its free list.
  void Free(uint8_t* chunk, std::size_t bytes);

  struct SizeClass {
    std::vector<uint8_t*> fresh;     // never handed out: still zero
    std::vector<uint8_t*> recycled;  // freed: zeroed again when handed out
  };
  mutable absl::Mutex mu_;
  std::map<std::size_t, SizeClass> sizes_ ABSL_GUARDED_BY(mu_);  // by chunk size
  int64_t slab_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_KV_CHUNK_ARENA_H_
