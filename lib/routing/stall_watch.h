// StallWatch: the decode streams a router relays, watched for a worker that stops sending. A
// stream is reported stalled, once, when it has had no token for `min_timeout` and its worker
// fails its health probe, or when, after its first token, no token comes for `multiple` times
// its own average gap between tokens (at least `min_timeout`): a worker stopped (SIGSTOP, a hung
// step) or cut off keeps its connections open, and without this its streams would wait for the
// client's deadline. The router then moves the request to another pair with the tokens already
// sent, as it does when a worker dies. Before a stream's first token only the health probe
// counts (waiting for a place in a busy batch or for the bundle is no stall), a worker that
// fails its probes but keeps sending (draining after SIGTERM) keeps its streams, and a healthy
// worker that only slows down keeps them when no other decode worker is healthy to take them
// (a lone worker under a burst is loaded, not stalled: moving its streams would only restart
// them on it).
//
// Thread-safe. `on_stall` runs on the sweeping thread with the watch's lock held, so it must be
// short and take no lock that a caller of Watch/Progress/Unwatch holds; once Unwatch returns it
// neither runs nor will.
#ifndef YOCO_LIB_ROUTING_STALL_WATCH_H_
#define YOCO_LIB_ROUTING_STALL_WATCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/threading/periodic_task.h"

namespace yoco {

struct StallWatchOptions {
  double multiple = 50;                           // of the stream's average inter-token gap
  absl::Duration min_timeout = absl::Seconds(2);  // the least gap reported as a stall
  absl::Duration sweep_interval = absl::Milliseconds(100);  // zero: only explicit Sweep calls
};

class StallWatch {
 public:
  // `healthy(worker)`: whether the worker passed its last health probe. `others_healthy(worker)`:
  // whether another worker did (null: assumed).
  StallWatch(StallWatchOptions options, std::function<bool(size_t worker)> healthy,
             std::function<bool(size_t worker)> others_healthy = nullptr);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Starts watching a stream on `worker`; returns its id.
  uint64_t Watch(size_t worker, std::function<void()> on_stall, absl::Time now = absl::Now());
  // A token came for the stream.
  void Progress(uint64_t id, absl::Time now = absl::Now());
  // Stops watching (no-op for an id already reported or unwatched).
  void Unwatch(uint64_t id);

  // Reports the streams stalled at `now` (the sweeping thread calls it every sweep_interval).
  void Sweep(absl::Time now = absl::Now());

  size_t watched() const;

 private:
  struct Stream {
    size_t worker;
    std::function<void()> on_stall;
    absl::Time last;  // the last token, or the start
    int64_t tokens = 0;
    absl::Duration gap_sum;  // between tokens, from the first
  };

  const StallWatchOptions options_;
  const std::function<bool(size_t)> healthy_;
  const std::function<bool(size_t)> others_healthy_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PeriodicTask> sweeper_;  // last: it uses the members above
};

}  // namespace yoco

#endif  // YOCO_LIB_ROUTING_STALL_WATCH_H_
