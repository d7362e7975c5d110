// WarmBufferPool: large byte buffers kept after use, for the bundles workers serialise and
// receive. In a virtual machine the first touch of fresh memory is the slow part of moving a
// long document: the host backs each page on demand, and on the machine these numbers come from
// a first pass over fresh memory ran at 0.2-0.6 GB/s against 10-20 GB/s over memory touched
// before. A 134 MB bundle went through fresh memory three times (serialised, received,
// copied into chunks), which made its transfer run at ~140 MB/s where UCX moves 1-3 GB/s.
// Buffers handed back here are given out again (the smallest one that fits), so a worker pays
// for its memory once.
//
// Up to `max_kept_bytes` of idle buffers are kept; beyond that the smallest idle ones go back to
// the system. Buffers in use are not counted against that bound. Thread-safe; buffers may
// outlive the pool.
#ifndef YOCO_LIB_ENGINE_WARM_BUFFER_POOL_H_
#define YOCO_LIB_ENGINE_WARM_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "lib/engine/huge_page_buffer.h"

namespace yoco {

struct WarmBufferPoolStats {
  int64_t kept_bytes = 0;    // idle, waiting to be reused
  int64_t in_use_bytes = 0;  // handed out (capacity, not the bytes asked for)
  int64_t reused = 0;        // Take calls served from kept buffers
  int64_t fresh = 0;         // Take calls that allocated
};

// A buffer handed out by the pool: at least `size()` bytes, uninitialised (or holding whatever
// its last user left). Back in the pool when destroyed.
class WarmBuffer {
 public:
  WarmBuffer(const WarmBuffer&) = delete;
  WarmBuffer& operator=(const WarmBuffer&) = delete;
  ~WarmBuffer();

  uint8_t* data() const { return buffer_.data(); }
  // The bytes asked for; the buffer may be larger.
  std::size_t size() const { return size_; }

 private:
  friend class WarmBufferPool;
  struct Shelf;
  WarmBuffer(std::shared_ptr<Shelf> shelf, HugePageBuffer buffer, std::size_t size)
      : shelf_(std::move(shelf)), buffer_(std::move(buffer)), size_(size) {}

  std::shared_ptr<Shelf> shelf_;
  HugePageBuffer buffer_;
  std::size_t size_;
};

class WarmBufferPool {
 public:
  explicit WarmBufferPool(std::size_t max_kept_bytes);

  // A buffer of at least `bytes` (rounded up to whole huge pages from 2 MB on). Throws
  // std::bad_alloc as operator new does.
  std::unique_ptr<WarmBuffer> Take(std::size_t bytes);

  // Keeps `bytes` (at most the bound) of buffers, touched, so that the first bundles do not pay
  // for fresh pages either: buffers of `piece` bytes (bundle parts), or one (0).
  void Prefault(std::size_t bytes, std::size_t piece = 0);

  WarmBufferPoolStats stats() const;

 private:
  std::shared_ptr<WarmBuffer::Shelf> shelf_;
};

// The idle buffers, shared by the pool and every buffer it handed out.
struct WarmBuffer::Shelf {
  explicit Shelf(std::size_t max_kept) : max_kept_bytes(max_kept) {}
  void Return(HugePageBuffer buffer);

  const std::size_t max_kept_bytes;
  mutable absl::Mutex mu;
  std::multimap<std::size_t, HugePageBuffer> idle ABSL_GUARDED_BY(mu);  // by capacity
  WarmBufferPoolStats stats ABSL_GUARDED_BY(mu);
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_WARM_BUFFER_POOL_H_
