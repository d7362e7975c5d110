// WarmBufferPool: best-fit reuse of idle huge-page buffers, smallest ones dropped first.
#include "lib/engine/warm_buffer_pool.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace yoco {
namespace {

std::size_t Capacity(std::size_t bytes) {
  constexpr std::size_t kPage = HugePageBuffer::kHugePageBytes;
  // Whole huge pages, so buffers of nearby sizes serve each other's requests.
  return bytes >= kPage ? (bytes + kPage - 1) / kPage * kPage : bytes;
}

}  // namespace

WarmBuffer::~WarmBuffer() { shelf_->Return(std::move(buffer_)); }

void WarmBuffer::Shelf::Return(HugePageBuffer buffer) {
  std::vector<HugePageBuffer> dropped;  // freed outside the lock
  absl::MutexLock lock(&mu);
  const auto capacity = static_cast<int64_t>(buffer.size());
  stats.in_use_bytes -= capacity;
  if (buffer.size() > max_kept_bytes) {
    dropped.push_back(std::move(buffer));
    return;
  }
  idle.emplace(buffer.size(), std::move(buffer));
  stats.kept_bytes += capacity;
  // The largest buffers serve every request the smaller ones would: drop the smallest first.
  while (stats.kept_bytes > static_cast<int64_t>(max_kept_bytes)) {
    auto smallest = idle.begin();
    stats.kept_bytes -= static_cast<int64_t>(smallest->first);
    dropped.push_back(std::move(smallest->second));
    idle.erase(smallest);
  }
}

WarmBufferPool::WarmBufferPool(std::size_t max_kept_bytes)
    : shelf_(std::make_shared<WarmBuffer::Shelf>(max_kept_bytes)) {}

std::unique_ptr<WarmBuffer> WarmBufferPool::Take(std::size_t bytes) {
  const std::size_t capacity = Capacity(bytes);
  {
    absl::MutexLock lock(&shelf_->mu);
    auto fit = shelf_->idle.lower_bound(capacity);
    if (fit != shelf_->idle.end()) {
      HugePageBuffer buffer = std::move(fit->second);
      shelf_->idle.erase(fit);
      const auto held = static_cast<int64_t>(buffer.size());
      shelf_->stats.kept_bytes -= held;
      shelf_->stats.in_use_bytes += held;
      ++shelf_->stats.reused;
      return std::unique_ptr<WarmBuffer>(new WarmBuffer(shelf_, std::move(buffer), bytes));
    }
  }
  HugePageBuffer buffer(capacity);  // allocated outside the lock
  {
    absl::MutexLock lock(&shelf_->mu);
    shelf_->stats.in_use_bytes += static_cast<int64_t>(capacity);
    ++shelf_->stats.fresh;
  }
  return std::unique_ptr<WarmBuffer>(new WarmBuffer(shelf_, std::move(buffer), bytes));
}

void WarmBufferPool::Prefault(std::size_t bytes, std::size_t piece) {
  bytes = std::min(bytes, shelf_->max_kept_bytes);
  if (piece == 0 || piece > bytes) piece = bytes;
  if (bytes == 0) return;
  // All taken before any is given back, so that each is a buffer of its own.
  std::vector<std::unique_ptr<WarmBuffer>> buffers;
  for (std::size_t n = 0; n + piece <= bytes; n += piece) {
    buffers.push_back(Take(piece));
    std::memset(buffers.back()->data(), 0, buffers.back()->size());
  }
}

WarmBufferPoolStats WarmBufferPool::stats() const {
  absl::MutexLock lock(&shelf_->mu);
  return shelf_->stats;
}

}  // namespace yoco
