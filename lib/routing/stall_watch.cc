// The watch's bookkeeping and sweep.
#include "lib/routing/stall_watch.h"

#include <algorithm>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace yoco {

StallWatch::StallWatch(StallWatchOptions options, std::function<bool(size_t worker)> healthy,
                       std::function<bool(size_t worker)> others_healthy)
    : options_(options), healthy_(std::move(healthy)), others_healthy_(std::move(others_healthy)) {
  if (options_.sweep_interval > absl::ZeroDuration()) {
    sweeper_ = std::make_unique<PeriodicTask>(options_.sweep_interval, [this] { Sweep(); });
  }
}

StallWatch::~StallWatch() { sweeper_.reset(); }

uint64_t StallWatch::Watch(size_t worker, std::function<void()> on_stall, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  streams_[id] = Stream{worker, std::move(on_stall), now, 0, absl::ZeroDuration()};
  return id;
}

void StallWatch::Progress(uint64_t id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  if (s.tokens > 0) s.gap_sum += now - s.last;
  ++s.tokens;
  s.last = now;
}

void StallWatch::Unwatch(uint64_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

void StallWatch::Sweep(absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    const Stream& s = it->second;
    const absl::Duration gap = now - s.last;
    // An unhealthy worker that still sends (one draining after SIGTERM fails its probes but
    // finishes its streams) is let be: only silence counts.
    bool stalled = gap > options_.min_timeout && !healthy_(s.worker);
    if (!stalled && s.tokens > 0 && (!others_healthy_ || others_healthy_(s.worker))) {
      // The average gap needs two tokens; after one, the floor alone.
      const absl::Duration average =
          s.tokens > 1 ? s.gap_sum / (s.tokens - 1) : absl::ZeroDuration();
      stalled = gap > std::max(options_.min_timeout, average * options_.multiple);
    }
    if (stalled) {
      it->second.on_stall();
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t StallWatch::watched() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace yoco
